"""The model under Inspect as a Rounds assistant: `respond` plays one physician turn on the sample's Inspect
conversation.

Per turn the physician's words are a user message on `TaskState.messages` (the system prompt of the
`openai:` adapter first, once); then Inspect's model generates with Rounds' tools (tools.py) until it calls
`answer` or replies with text. Each tool call runs through Rounds' `ToolExecutor` inside `call_recorded`
(so it is a counted step with its `rounds.tool.call|result` pair, FHIR over the session's sandbox, the
patient agent behind `ask_patient`), and its result goes back to the model as a tool message. The model
call's usage rides on its first result, as for `openai:`.

Failures: an Inspect limit inside the turn becomes the Rounds failure limits.py maps it to (and is kept, so
the solver re-raises it once the session ended); a model call that fails otherwise (Inspect already retried
it) is Rounds' infrastructure, never the assistant's fault; no text and no answer is the assistant's.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from inspect_ai.model import ChatMessageSystem, ChatMessageTool, ChatMessageUser, Model, ModelOutput
from inspect_ai.solver import TaskState
from inspect_ai.tool import ToolCallError
from inspect_ai.util import LimitExceededError

from rounds.inspect.limits import failure_for
from rounds.inspect.tools import tool_infos
from services.simulator.assistant_protocol import (
    AssistantFailure,
    InfrastructureFailure,
    SessionFailure,
    SessionTools,
    TurnRequest,
)
from services.simulator.assistants.fhir_tools import ToolExecutor, ToolOutcome, call_recorded
from services.simulator.assistants.openai_chat import system_prompt

NOT_RUN = "not run: the turn ended with the answer"


@dataclass
class InspectAssistant:
    """One sample's model as the assistant of its one Rounds session."""

    model: Model
    state: TaskState
    spec: str = ""
    limit: LimitExceededError | None = None  # the Inspect limit that ended the session, for the solver
    session_id: str | None = None
    _prompted: bool = field(default=False, repr=False)

    def __post_init__(self) -> None:
        self.spec = self.spec or f"inspect:{self.model}"

    async def aclose(self) -> None:
        return None

    async def respond(self, request: TurnRequest, tools: SessionTools) -> str:
        self.session_id = request.session_id
        try:
            return await self._turn(request, tools)
        except LimitExceededError as exc:
            self.limit = exc
            raise failure_for(exc.type, exc.message) from exc

    async def _turn(self, request: TurnRequest, tools: SessionTools) -> str:
        messages = self.state.messages
        if not self._prompted:
            self.state.messages = [ChatMessageSystem(content=system_prompt(request))]
            messages, self._prompted = self.state.messages, True
        messages.append(ChatMessageUser(content=request.message))
        executor = ToolExecutor(tools)
        while True:
            output = await self._generate()
            self.state.output = output
            message = output.message
            messages.append(message)
            usage = _usage(output)
            calls = message.tool_calls or []
            if not calls:
                text = message.text
                if not text.strip():
                    raise AssistantFailure(f"the model answered without text (stop: {output.stop_reason})")
                outcome = await call_recorded(executor, "answer", {"text": text}, usage)
                return outcome.final or text.strip()
            for position, call in enumerate(calls):
                arguments: Any = call.arguments
                if call.parse_error:
                    arguments = f"<unparsable> {call.parse_error}"  # Rounds' executor: not valid JSON
                outcome = await call_recorded(executor, call.function, arguments, usage)
                usage = None  # the model call is accounted on its first result only
                messages.append(_tool_message(call.id, call.function, outcome))
                if outcome.final is not None:
                    messages.extend(ChatMessageTool(content=NOT_RUN, tool_call_id=rest.id,
                                                    function=rest.function) for rest in calls[position + 1:])
                    return outcome.final

    async def _generate(self) -> ModelOutput:
        try:
            return await self.model.generate(self.state.messages, tools=list(tool_infos()))
        except (LimitExceededError, SessionFailure):
            raise
        except Exception as exc:  # noqa: BLE001 - Inspect retried the provider: the endpoint failed, not the model
            raise InfrastructureFailure(f"the model call failed: {type(exc).__name__}: {exc}"[:2000]) from exc


def _tool_message(call_id: str, function: str, outcome: ToolOutcome) -> ChatMessageTool:
    error = None
    if outcome.error is not None:
        kind = "unknown" if outcome.error.startswith("HTTP ") else "parsing"
        error = ToolCallError(kind, outcome.error)
    return ChatMessageTool(content=outcome.for_model(), tool_call_id=call_id, function=function, error=error)


def _usage(output: ModelOutput) -> dict[str, int]:
    """Inspect's usage in the shape Rounds records (`openai:`'s keys)."""
    usage = output.usage
    out: dict[str, int] = {"retries": 0}
    if output.time is not None:
        out["latency_ms"] = round(output.time * 1000)
    if usage is not None:
        out |= {"prompt_tokens": usage.input_tokens, "completion_tokens": usage.output_tokens,
                "total_tokens": usage.total_tokens}
    return out
