"""`cds-hooks:<url of the service's /cds-services>` — a CDS Hooks 2.0 service under test, with Rounds as the
EHR (the CDS client).

Before the first session Rounds reads the discovery document (its services, their hooks and prefetch
templates). As a session's turns go by it fires the hooks data/cds_hooks.json `when` names — patient-view at
the first turn, order-select then order-sign in a turn whose physician orders, encounter-discharge after the
last when the stay has ended at the session's clock — to every service declaring that hook, with the context,
the prefetch filled from the session's sandbox at its clock (through the session's FHIR client, so those reads
are on the log like any), the session's `fhirServer` and, with auth on, its token as `fhirAuthorization`. Each
call's cards and systemActions (or its error) are a `rounds.cds.exchange` event; the physician's feedback on
the cards is POSTed to the service's `/feedback` and recorded too. The turn's answer is the cards as the
physician reads them. A service that answers non-2xx or breaks the spec fails the session as the assistant's
error; one that does not answer in time, `timeout`; one that cannot be reached, infrastructure (as `http:`).
"""

from __future__ import annotations

import time

import httpx

from services.simulator.assistant_protocol import (
    AssistantFailure,
    AssistantTimeout,
    EndpointUnavailable,
    InfrastructureFailure,
    SessionTools,
    TurnRequest,
)
from services.simulator.assistants import cds_requests as cds
from services.simulator.assistants import webhook


class CdsHooksAssistant:
    spec = "cds-hooks"
    needs_network = True  # the service gets fhirServer and may read it from its own process

    def __init__(self, url: str) -> None:
        self.url = webhook.checked_url(url, "cds-hooks").rstrip("/")
        self.client = httpx.AsyncClient(timeout=httpx.Timeout(cds.rules()["timeout_s"], connect=10))
        self.services: list[dict] | None = None

    async def _discover(self) -> list[dict]:
        if self.services is None:
            try:
                response = await self.client.get(self.url)
            except httpx.TransportError as exc:
                raise EndpointUnavailable(f"cannot reach the CDS discovery {self.url}: {exc!r}") from None
            try:
                services = response.json()["services"]
                assert isinstance(services, list)
                assert all(isinstance(s.get("hook"), str) and isinstance(s.get("id"), str) for s in services)
            except Exception:  # noqa: BLE001 - any other shape is not a discovery document
                raise EndpointUnavailable(f"{self.url} (HTTP {response.status_code}) is not a CDS Hooks "
                                          f"discovery document: {response.text[:200]!r}") from None
            self.services = services
        return self.services

    async def preflight(self) -> str:
        services = await self._discover()
        return f"{self.url} offers {len(services)} CDS services: " + ", ".join(
            f"{s['id']} ({s['hook']})" for s in services)

    async def hooks(self, request: TurnRequest, tools: SessionTools) -> list[str]:
        """The hooks this turn fires, in order (data: `when`)."""
        fired = ["patient-view"] if request.turn == 0 else []
        if request.draft_orders:
            fired += ["order-select", "order-sign"]
        if request.last_turn and request.encounter and await self._discharged(request.encounter, tools):
            fired.append("encounter-discharge")
        return fired

    @staticmethod
    async def _discharged(encounter: str, tools: SessionTools) -> bool:
        """Whether the stay has ended at the session's clock (its Encounter as the sandbox shows it then)."""
        response = await tools.http.get(encounter)
        return response.status_code == 200 and response.json().get("status") == "finished"

    async def respond(self, request: TurnRequest, tools: SessionTools) -> str:
        lines: list[str] = []
        for hook in await self.hooks(request, tools):
            for service in await self._discover():
                if service["hook"] == hook:
                    lines += cds.rendered(hook, await self._call(service, hook, request, tools))
        return "\n".join(lines) or "No CDS cards."

    async def _prefetch(self, service: dict, ctx: dict, tools: SessionTools) -> dict:
        filled: dict = {}
        for key, template in (service.get("prefetch") or {}).items():
            query = cds.fill(str(template), ctx)
            if query is None:
                continue
            response = await tools.http.get(query)
            filled[key] = response.json() if response.status_code == 200 else None
        return filled

    async def _call(self, service: dict, hook: str, request: TurnRequest, tools: SessionTools) -> list[dict]:
        ctx = cds.context(hook, request)
        prefetch = await self._prefetch(service, ctx, tools)
        sent = cds.body(hook, request, ctx, prefetch)
        record = {"service": service["id"], "hook": hook, "hook_instance": sent["hookInstance"],
                  "context": ctx, "prefetch": sorted(prefetch)}
        started = time.monotonic()
        try:
            response = await self.client.post(f"{self.url}/{service['id']}", json=sent)
        except httpx.TimeoutException as exc:
            tools.cds_exchange(**record, outcome="timeout", error=repr(exc))
            raise AssistantTimeout(f"turn {request.turn}: CDS service {service['id']} ({hook}) did not "
                                   f"answer within {cds.rules()['timeout_s']} s") from exc
        except httpx.TransportError as exc:
            tools.cds_exchange(**record, outcome="error", error=repr(exc))
            raise InfrastructureFailure(f"turn {request.turn}: CDS service {service['id']} unreachable: "
                                        f"{exc!r}") from exc
        latency = (time.monotonic() - started) * 1000
        try:
            if response.status_code // 100 != 2:
                raise cds.InvalidResponse(f"HTTP {response.status_code}: {response.text[:300]}")
            cards, actions = cds.checked(response.json())
        except (cds.InvalidResponse, ValueError) as exc:
            tools.cds_exchange(**record, outcome="error", http_status=response.status_code,
                               latency_ms=latency, error=str(exc)[:2000])
            raise AssistantFailure(f"turn {request.turn}: CDS service {service['id']} ({hook}): {exc}"
                                   ) from exc
        tools.cds_exchange(**record, outcome="cards", http_status=response.status_code, latency_ms=latency,
                           cards=cards, system_actions=actions)
        await self._feedback(service, record, cards, tools)
        return cards

    async def _feedback(self, service: dict, record: dict, cards: list[dict], tools: SessionTools) -> None:
        """The physician's outcome per card, POSTed as the spec says; a service without /feedback is not
        failed for it (feedback is optional for services), the answer is recorded."""
        sent = cds.feedback(cards)
        if not sent:
            return
        try:
            response = await self.client.post(f"{self.url}/{service['id']}/feedback", json={"feedback": sent})
            status, error = response.status_code, None if response.is_success else response.text[:300]
        except httpx.HTTPError as exc:
            status, error = None, repr(exc)
        tools.cds_exchange(**{**record, "context": {}}, outcome="feedback", http_status=status, feedback=sent,
                           error=error)

    async def aclose(self) -> None:
        await self.client.aclose()


def create(arg: str) -> CdsHooksAssistant:
    return CdsHooksAssistant(arg)
