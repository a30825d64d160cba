"""`mcp:<url>`: an external MCP-capable agent, called as a webhook once per physician turn, that works the
EHR through the session's MCP endpoint (mcp_server.py) instead of raw FHIR.

Rounds POSTs `{session, turn, message, language, mcpUrl, fhirBase, patient, now, history}` to `<url>` and
expects `{"text": ...}`. Around the call the turn's `SessionTools` are registered with the MCP server, so the
agent's tool calls are counted, recorded and charged like `openai:`'s; a call that ended the session inside
the MCP server (step limit, infrastructure, repeated garbage) is raised here once the webhook returns.

Classification as for `http:`: a webhook that cannot be reached is infrastructure; one that answers non-2xx,
non-JSON or without text is the assistant's fault — unless it called the `answer` tool, whose text then
stands. The orchestrator's deadline bounds the call (`timeout`).
"""

from __future__ import annotations

from typing import Any

import httpx

from services.simulator.assistant_protocol import (
    AssistantFailure,
    InfrastructureFailure,
    SessionTools,
    TurnRequest,
)
from services.simulator.assistants import webhook
from services.simulator.assistants.mcp_server import REGISTRY, TurnRegistry


def mcp_url(session_url: str) -> str:
    """The session's MCP endpoint beside its patient endpoint (…/sessions/<id>/patient → …/sessions/<id>/mcp),
    which the simulator serves in both set-ups: on the in-process FHIR app, or on its own port next to a
    separate `rounds serve`. A session FHIR base (…/sessions/<id>/fhir) is accepted too."""
    base = session_url.rstrip("/")
    for suffix in ("/patient", "/fhir"):
        if base.endswith(suffix) and "/sessions/" in base:
            return f"{base.removesuffix(suffix)}/mcp"
    raise ValueError(f"not a session endpoint: {session_url!r}")


class McpAgentAssistant:
    needs_network = True  # the agent is another process: it needs real URLs for the MCP endpoint

    def __init__(self, spec: str, url: str, registry: TurnRegistry = REGISTRY) -> None:
        self.spec, self.url, self.registry = spec, url, registry
        self.client = httpx.AsyncClient(timeout=httpx.Timeout(600, connect=10))

    async def preflight(self) -> str:
        return await webhook.preflight(self.client, self.url, "MCP agent's webhook")

    def payload(self, request: TurnRequest) -> dict[str, Any]:
        return {
            "session": request.session_id,
            "turn": request.turn,
            "message": request.message,
            "language": request.language,
            "mcpUrl": mcp_url(request.patient_url),
            "fhirBase": request.fhir_base,
            "patient": request.patient,
            "now": request.now,
            "history": [{"role": h.role, "text": h.text, "turn": h.turn} for h in request.history],
        } | ({"accessToken": request.access_token} if request.access_token else {})

    async def respond(self, request: TurnRequest, tools: SessionTools) -> str:
        with self.registry.turn(request.session_id, tools) as active:
            try:
                response = await self.client.post(self.url, json=self.payload(request))
            except httpx.TransportError as exc:
                if active.failure is not None:
                    raise active.failure from exc
                raise InfrastructureFailure(
                    f"turn {request.turn}: agent {self.url} unreachable: {exc!r}"
                ) from exc
        if active.failure is not None:
            raise active.failure
        where = f"turn {request.turn}: agent"
        if response.status_code // 100 != 2:
            raise AssistantFailure(f"{where} answered HTTP {response.status_code}: {response.text[:300]}")
        try:
            body = response.json()
        except ValueError:
            body = None
        text = body.get("text") if isinstance(body, dict) else None
        if isinstance(text, str) and text.strip():
            return text.strip()
        if active.answer:
            return active.answer
        raise AssistantFailure(f"{where} answer has no text: {response.text[:300]!r}")

    async def aclose(self) -> None:
        await self.client.aclose()


def create(arg: str) -> McpAgentAssistant:
    """`mcp:<url>` → the assistant (the registry calls this with what follows `mcp:`)."""
    url = webhook.checked_url(arg.strip(), "mcp")
    return McpAgentAssistant(f"mcp:{url}", url)
