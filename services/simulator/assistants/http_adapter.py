"""`http:<url>` — an assistant in another process, called as a webhook once per physician turn.

Rounds POSTs `{session, turn, message, language, fhirBase, patientUrl, history}` and expects `{"text": ...}`;
the assistant calls the session's FHIR base and the patient endpoint itself (so the FHIR server records its
EHR calls like anyone's). An answer that is not 2xx JSON with a non-empty `text` string is the assistant's
fault; a connection that cannot be made or breaks is the network's (infrastructure). Before the first session
the URL is probed (`preflight`): a webhook nobody serves stops the run with one message naming it.
"""

from __future__ import annotations

import httpx

from services.simulator.assistant_protocol import (
    AssistantFailure,
    InfrastructureFailure,
    SessionTools,
    TurnRequest,
)
from services.simulator.assistants import webhook


class HttpAssistant:
    spec = "http"
    needs_network = True  # the FHIR base and patient URL it gets must be reachable from another process

    def __init__(self, url: str) -> None:
        self.url = webhook.checked_url(url, "http")
        self.client = httpx.AsyncClient(timeout=httpx.Timeout(600, connect=10))

    async def preflight(self) -> str:
        return await webhook.preflight(self.client, self.url, "assistant webhook")

    async def respond(self, request: TurnRequest, tools: SessionTools) -> str:
        payload = {
            "session": request.session_id,
            "turn": request.turn,
            "message": request.message,
            "language": request.language,
            "fhirBase": request.fhir_base,
            "patientUrl": request.patient_url,
            "patient": request.patient,
            "now": request.now,
            "history": [{"role": h.role, "text": h.text, "turn": h.turn} for h in request.history],
        }
        if request.access_token:  # auth on: the session's bearer token for its FHIR base and endpoints
            payload["accessToken"] = request.access_token
        try:
            response = await self.client.post(self.url, json=payload)
        except httpx.TransportError as exc:
            raise InfrastructureFailure(
                f"turn {request.turn}: webhook {self.url} unreachable: {exc!r}"
            ) from exc
        if response.status_code // 100 != 2:
            raise AssistantFailure(
                f"turn {request.turn}: webhook answered HTTP {response.status_code}: {response.text[:300]}"
            )
        try:
            body = response.json()
        except ValueError:
            raise AssistantFailure(
                f"turn {request.turn}: webhook answer is not JSON: {response.text[:300]!r}"
            ) from None
        text = body.get("text") if isinstance(body, dict) else None
        if not isinstance(text, str) or not text.strip():
            raise AssistantFailure(f"turn {request.turn}: webhook answer has no text: {str(body)[:300]}")
        return text

    async def aclose(self) -> None:
        await self.client.aclose()


def create(arg: str) -> HttpAssistant:
    return HttpAssistant(f"http:{arg}")


def create_https(arg: str) -> HttpAssistant:
    return HttpAssistant(f"https:{arg}")
