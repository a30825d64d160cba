"""`POST /sessions/<id>/patient {"text"}` → `{"text"}`: the patient over HTTP (assistants in another process).

The router belongs to the simulator (the FHIR service never imports it): on the embedded default it is mounted
on the in-process FHIR app, so the patient is reachable beside the session's FHIR base; against a separate
`rounds serve` the simulator serves it on its own port, with auth on holding requests to the server's rules
(the session's bearer token). Either way the exchange goes through the running
session (`LiveSession.ask_patient`), so it is counted and recorded exactly like an in-process question.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, FastAPI, Request
from fastapi.responses import JSONResponse
from pydantic import BaseModel

from services.simulator.assistant_protocol import SessionFailure
from services.simulator.orchestrator.live_session import LiveSession

router = APIRouter(tags=["simulator"])


class Said(BaseModel):
    """What the assistant says to the patient, and the patient's answer: `{"text"}` both ways."""

    text: str


class Refusal(BaseModel):
    error: str


# The statuses ask_patient answers besides 200, for the app's OpenAPI document (the body is read by hand,
# so the FastAPI validation error it would otherwise list is never answered).
RESPONSES: dict[int | str, dict] = {
    400: {"model": Refusal, "description": 'the body is not {"text": <non-empty string>}'},
    404: {"model": Refusal, "description": "no running simulated session with this id"},
    409: {"model": Refusal, "description": "the session ended on an assistant error"},
    429: {"model": Refusal, "description": "the session reached its step limit"},
    503: {"model": Refusal, "description": "the simulated patient could not answer"},
}


def sessions_of(app: FastAPI) -> dict[str, LiveSession]:
    """The registry of running sessions the router answers for (created on first use)."""
    registry = getattr(app.state, "simulator_sessions", None)
    if registry is None:
        registry = app.state.simulator_sessions = {}
    return registry


def _error(status: int, detail: str) -> JSONResponse:
    return JSONResponse({"error": detail}, status_code=status)


@router.post(
    "/sessions/{session_id}/patient", summary='ask the session\'s patient: {"text"} -> {"text"}',
    response_model=Said, responses=RESPONSES,
    openapi_extra={"requestBody": {"required": True, "content": {
        "application/json": {"schema": {"$ref": "#/components/schemas/Said"}}}}},
)
async def ask_patient(session_id: str, request: Request) -> JSONResponse:
    live = sessions_of(request.app).get(session_id)
    if live is None or live.closed:
        return _error(404, f"no running simulated session {session_id}")
    try:
        body = await request.json()
    except ValueError:
        return _error(400, "body must be JSON: {\"text\": ...}")
    text = body.get("text") if isinstance(body, dict) else None
    if not isinstance(text, str) or not text.strip():
        return _error(400, "body must be {\"text\": <non-empty string>}")
    try:
        answer = await live.ask_patient(text)
    except SessionFailure as failure:
        live.pending_failure = failure  # the orchestrator ends the session with its reason after the turn
        status = 429 if failure.reason == "max_steps" else 409 if failure.reason == "assistant_error" else 503
        return _error(status, failure.detail)
    return JSONResponse({"text": answer})


def patient_app(auth: Any = None) -> FastAPI:
    """The patient endpoint alone (served by the simulator next to a separate `rounds serve`). With `auth`
    (services.fhir_api.auth.endpoint_auth: the server's key, auth on) it demands the session's token as the
    server does; `app.state.auth` is what the MCP endpoint mounted on this app checks too."""
    app = FastAPI(title="Rounds simulated patient", docs_url="/docs")
    app.include_router(router)
    app.state.auth = auth
    if auth is not None:
        from services.fhir_api.auth.middleware import SessionEndpointAuth

        app.add_middleware(SessionEndpointAuth, auth=auth)
    return app
