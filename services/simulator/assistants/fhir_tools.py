"""The tools every tool-using adapter offers (`openai:`, the MCP server) and the executor that runs a call.

The tools are data (data/fhir_tools.json: names, descriptions, JSON Schemas, limits), so the chat-completions
adapter and the MCP server offer the same tools with the same schemas, every turn. A call runs against the
turn's `SessionTools`: FHIR over HTTP on the session's base (so the FHIR server records it as `rounds.ehr.*`),
the patient and the physician through their callbacks.

Who is charged for what (the contract of assistant_protocol.py):
- an unknown tool name → `AssistantFailure` at once (the orchestrator's `step` refuses it the same way);
- arguments that are not a JSON object or break the tool's schema → an error result the model may correct;
  the `max_invalid_calls`-th such call in one turn → `AssistantFailure` (garbage is not retried forever);
- FHIR 4xx → the server's OperationOutcome returned to the model (a bad parameter, an unknown id, an invalid
  resource: the model's mistake to fix; scoring sees it in the record);
- FHIR 5xx, timeouts, connection errors → `InfrastructureFailure` (never charged to the assistant);
- an empty `answer` → `AssistantFailure`; the patient's and physician's own failures propagate unchanged.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from functools import cache
from importlib import resources
from typing import Any

import httpx
from jsonschema import Draft202012Validator

from services.simulator.assistant_protocol import (
    AssistantFailure,
    InfrastructureFailure,
    SessionFailure,
    SessionTools,
    StepLimitExceeded,
)
from services.simulator.assistants.compact import CompactRules, compact_response, dumps

FHIR_JSON = {"Accept": "application/fhir+json", "Content-Type": "application/fhir+json"}


@dataclass(frozen=True)
class ToolSpec:
    name: str
    description: str
    parameters: dict[str, Any]  # JSON Schema of the arguments object


@dataclass(frozen=True)
class Toolset:
    tools: tuple[ToolSpec, ...]
    rules: CompactRules
    max_invalid_calls: int

    def get(self, name: str) -> ToolSpec | None:
        return next((t for t in self.tools if t.name == name), None)


@cache
def toolset() -> Toolset:
    """The tool definitions shipped in data/fhir_tools.json (schemas checked once, at load)."""
    raw = json.loads(resources.files(__package__).joinpath("data/fhir_tools.json").read_text())
    specs = []
    for tool in raw["tools"]:
        Draft202012Validator.check_schema(tool["parameters"])
        specs.append(ToolSpec(tool["name"], tool["description"], tool["parameters"]))
    limits = raw["limits"]
    rules = CompactRules(
        result_chars=limits["result_chars"],
        string_chars=limits["string_chars"],
        drop_keys=frozenset(raw["drop_keys"]),
        keep_meta=frozenset(raw["keep_meta"]),
    )
    return Toolset(tuple(specs), rules, limits["max_invalid_calls"])


@dataclass
class ToolOutcome:
    """One call's result. `output` is what the model and `rounds.tool.result` see; `error` (the model's
    mistake, e.g. a 4xx) replaces it, with `detail` (the OperationOutcome) shown to the model beside it."""

    name: str
    arguments: dict[str, Any]
    output: Any = None
    error: str | None = None
    detail: Any = None
    final: str | None = None  # the answer text, for `answer`
    latency_ms: float = 0.0

    def for_model(self) -> str:
        if self.error is None:
            return self.output if isinstance(self.output, str) else dumps(self.output)
        body: dict[str, Any] = {"error": self.error}
        if self.detail is not None:
            body["operationOutcome"] = self.detail
        return dumps(body)


def parse_arguments(raw: str | dict | None) -> tuple[dict[str, Any], str | None]:
    """Arguments as sent by a model (a JSON text or an object) → (object, problem or None)."""
    if raw is None or raw == "":
        return {}, None
    if isinstance(raw, dict):
        return raw, None
    try:
        value = json.loads(raw)
    except (TypeError, ValueError) as exc:
        return {"_raw": str(raw)[:2000]}, f"arguments are not valid JSON: {exc}"
    if not isinstance(value, dict):
        return {"_raw": str(raw)[:2000]}, "arguments must be a JSON object"
    return value, None


@dataclass
class ToolExecutor:
    """Runs the tool calls of one turn against that turn's SessionTools."""

    tools: SessionTools
    spec: Toolset = field(default_factory=toolset)
    invalid_calls: int = 0

    async def run(self, name: str, raw_arguments: str | dict | None) -> ToolOutcome:
        tool = self.spec.get(name)
        if tool is None:
            raise AssistantFailure(f"unknown tool {name!r}")
        arguments, problem = parse_arguments(raw_arguments)
        if problem is None:
            errors = sorted(Draft202012Validator(tool.parameters).iter_errors(arguments), key=str)
            if errors:
                where = "/".join(str(p) for p in errors[0].absolute_path) or "arguments"
                problem = f"invalid arguments for {name} at {where}: {errors[0].message}"
        if problem is not None:
            self.invalid_calls += 1
            if self.invalid_calls >= self.spec.max_invalid_calls:
                raise AssistantFailure(f"{problem} ({self.invalid_calls} invalid tool calls this turn)")
            return ToolOutcome(name, arguments, error=problem)
        started = time.perf_counter()
        outcome = await getattr(self, f"_{name}")(arguments)
        outcome.latency_ms = round((time.perf_counter() - started) * 1000, 3)
        return outcome

    async def _fhir(self, name: str, arguments: dict, method: str, path: str, **kwargs: Any) -> ToolOutcome:
        """One FHIR exchange: 2xx → compact body, 4xx → the model's error, 5xx/transport → infrastructure."""
        try:
            response = await self.tools.http.request(method, path, headers=FHIR_JSON, **kwargs)
        except httpx.HTTPError as exc:  # timeouts, refused connections, broken streams
            raise InfrastructureFailure(f"FHIR {method} {path}: {type(exc).__name__}: {exc}") from exc
        if response.status_code >= 500:
            raise InfrastructureFailure(
                f"FHIR {method} {path}: HTTP {response.status_code}: {response.text[:500]}"
            )
        try:
            body = response.json() if response.content else None
        except ValueError:
            body = response.text
        if response.status_code >= 400:
            rules = self.spec.rules
            detail = compact_response(body, rules) if body is not None else None
            return ToolOutcome(name, arguments, error=f"HTTP {response.status_code}", detail=detail)
        return ToolOutcome(name, arguments, output=self._written(response, body))

    def _written(self, response: httpx.Response, body: Any) -> Any:
        if response.request.method in ("POST", "PUT") and isinstance(body, dict):
            # A write answers with where the resource now lives and its version (what a client needs next).
            return {
                "status": response.status_code,
                "reference": f"{body.get('resourceType')}/{body.get('id')}",
                "versionId": (body.get("meta") or {}).get("versionId"),
            }
        return compact_response(body, self.spec.rules)

    async def _fhir_search(self, args: dict) -> ToolOutcome:
        params = [
            (key, _param(v))
            for key, value in (args.get("params") or {}).items()
            for v in (value if isinstance(value, list) else [value])
        ]
        return await self._fhir("fhir_search", args, "GET", args["resourceType"], params=params)

    async def _fhir_read(self, args: dict) -> ToolOutcome:
        return await self._fhir("fhir_read", args, "GET", f"{args['resourceType']}/{args['id']}")

    async def _fhir_create(self, args: dict) -> ToolOutcome:
        resource = args["resource"]
        return await self._fhir(
            "fhir_create", args, "POST", resource["resourceType"], content=dumps(resource)
        )

    async def _fhir_update(self, args: dict) -> ToolOutcome:
        resource = args["resource"]
        path = f"{resource['resourceType']}/{resource['id']}"
        return await self._fhir("fhir_update", args, "PUT", path, content=dumps(resource))

    async def _ask_patient(self, args: dict) -> ToolOutcome:
        return ToolOutcome("ask_patient", args, output=await self.tools.ask_patient(args["question"]))

    async def _ask_physician(self, args: dict) -> ToolOutcome:
        if self.tools.ask_physician is None:
            return ToolOutcome("ask_physician", args, error="the physician takes no questions in this run")
        return ToolOutcome("ask_physician", args, output=await self.tools.ask_physician(args["question"]))

    async def _answer(self, args: dict) -> ToolOutcome:
        text = args["text"].strip()
        if not text:
            raise AssistantFailure("empty answer")
        return ToolOutcome("answer", args, output=text, final=text)


def _param(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


async def call_recorded(
    executor: ToolExecutor, name: str, raw_arguments: str | dict | None, usage: dict[str, int] | None = None
) -> ToolOutcome:
    """Run one tool call with its `rounds.tool.call|result` pair: `step` first (it counts steps and may end
    the turn), then the call, then `result` — also when the call ends the session, so the log shows why.
    `usage` (the model call that asked for it) is recorded on every path: on the result, or on its own when
    `step` ended the turn before there was one."""
    tools = executor.tools
    arguments, _ = parse_arguments(raw_arguments)
    try:
        call_id = tools.step(name, arguments)
    except SessionFailure as exc:
        if usage is not None:
            outcome = "step_limit" if isinstance(exc, StepLimitExceeded) else "failed"
            tools.model_call(outcome, usage, str(exc)[:500])
        raise
    try:
        outcome = await executor.run(name, raw_arguments)
    except SessionFailure as exc:
        tools.result(call_id, name, error=f"{exc.reason}: {exc.detail}", usage=usage)
        raise
    tools.result(
        call_id,
        name,
        output=None if outcome.error else outcome.output,
        error=outcome.error,
        latency_ms=outcome.latency_ms,
        usage=usage,
    )
    return outcome
