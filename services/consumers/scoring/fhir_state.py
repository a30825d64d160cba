"""Reading a sandbox's final state through the FHIR API (never the store directly): the session's writes
(`GET /sessions/<id>/writes`) and, for no_future_value, the shared record's results for the codes the
scenario's facts name (`GET /fhir/Observation?patient=&code=`, no clock).

Nothing here goes through the session's FHIR base, so the scorer's reads are never recorded as the
assistant's EHR calls. `fhir_client(settings, engine)` talks to `ROUNDS_FHIR_BASE` when set (a separate
server), else to an in-process app on the process's engine (the embedded default).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Any

import anyio.from_thread
import httpx
from sqlalchemy import Engine

from contracts.scenario import Scenario
from services.consumers.scoring.check_inputs import FinalState, RecordValue, Written
from services.consumers.scoring.constraints import parse_time

MAX_PAGES = 20


class SandboxMissing(LookupError):
    """The session's sandbox does not exist on this FHIR server (dropped, or a log loaded elsewhere)."""


class PortalTransport(httpx.BaseTransport):
    """A synchronous transport onto an ASGI app in this process (httpx.ASGITransport is async only): each
    request runs in a blocking portal's event loop thread, which also runs the app's lifespan. A failure in
    the app is its 500 answer, as from a remote server (the scorer retries it), never an exception raised
    into the caller (that made a session's end a poison event)."""

    def __init__(self, app: Any) -> None:
        self._inner = httpx.ASGITransport(app=app, raise_app_exceptions=False)
        self._portal_cm = anyio.from_thread.start_blocking_portal()
        self._portal = self._portal_cm.__enter__()
        self._lifespan = self._portal.wrap_async_context_manager(app.router.lifespan_context(app))
        self._lifespan.__enter__()

    async def _send(self, request: httpx.Request) -> tuple[int, list[tuple[bytes, bytes]], bytes]:
        response = await self._inner.handle_async_request(request)
        body = b"".join([chunk async for chunk in response.stream])
        return response.status_code, response.headers.raw, body

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        request.read()
        status, headers, body = self._portal.call(self._send, request)
        return httpx.Response(status, headers=headers, content=body, request=request)

    def close(self) -> None:
        try:
            self._lifespan.__exit__(None, None, None)
        finally:
            self._portal_cm.__exit__(None, None, None)


def fhir_client(settings: Any, engine: Engine) -> httpx.Client:
    """An HTTP client on the FHIR API root (the scorer's only way to the record); the in-process API, when
    no separate server is configured, on the process's `engine`."""
    from services.fhir_api.auth import service_headers

    headers = service_headers(settings, engine, "system/*.rs")  # auth on: a read-only token of the deployment
    base = getattr(settings, "fhir_base", None)
    if base:
        return httpx.Client(base_url=base.rstrip("/"), timeout=60, headers=headers)
    from services.fhir_api.app import app_on_engine

    app = app_on_engine(settings.model_copy(update={"api_concurrency": 0}), engine)  # the scorer's: no queue
    return httpx.Client(transport=PortalTransport(app), base_url="http://rounds.local", timeout=60,
                        headers=headers)


class LazyClient:
    """`fhir_client(settings, engine)`, made on its first use: a re-score of a log that recorded its sessions'
    states reads few sandboxes or none, and the in-process FHIR app costs ~1 s to import and start (and a
    thread, which members forked from this process must not inherit). Closing it closes the client if one
    was made."""

    def __init__(self, settings: Any, engine: Engine) -> None:
        self.settings, self.engine = settings, engine
        self._client: httpx.Client | None = None
        self._lock = threading.Lock()

    def get(self, url: str, **kwargs: Any) -> httpx.Response:
        return self.client.get(url, **kwargs)

    @property
    def client(self) -> httpx.Client:
        with self._lock:  # a batch's prefetch reads in threads
            if self._client is None:
                self._client = fhir_client(self.settings, self.engine)
            return self._client

    def close(self) -> None:
        if self._client is not None:
            self._client.close()
            self._client = None

    def __enter__(self) -> LazyClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


Client = httpx.Client | LazyClient  # what reads sandboxes: a client, or one made on first use


def _written(entry: dict[str, Any]) -> Written:
    path = entry["fullUrl"].rsplit("/", 2)
    etag = entry.get("response", {}).get("etag", 'W/"0"')
    method = entry.get("request", {}).get("method", "PUT")
    deleted = method == "DELETE" or "resource" not in entry
    return Written(path[-2], path[-1], int(etag.strip('W/"') or 0), deleted, method, entry.get("resource"))


def read_writes(client: Client, session_id: str) -> list[Written]:
    response = client.get(f"/sessions/{session_id}/writes")
    if response.status_code == 404:
        raise SandboxMissing(session_id)
    response.raise_for_status()
    return [_written(entry) for entry in response.json().get("entry") or ()]


def _quantity(resource: dict[str, Any]) -> tuple[float, str | None] | None:
    quantity = resource.get("valueQuantity")
    if isinstance(quantity, dict) and isinstance(quantity.get("value"), int | float):
        return float(quantity["value"]), quantity.get("unit") or quantity.get("code")
    return None


def read_record_values(client: Client, patient: str, code: str) -> list[RecordValue]:
    """Every Observation of the patient with `code` in the shared record, any time (paged)."""
    url: str | None = "/fhir/Observation"
    params: dict[str, Any] | None = {"patient": patient, "code": code, "_count": 1000}
    values: list[RecordValue] = []
    for _ in range(MAX_PAGES):
        if url is None:
            break
        response = client.get(url, params=params)
        response.raise_for_status()
        bundle = response.json()
        for entry in bundle.get("entry") or ():
            resource = entry.get("resource") or {}
            found = _quantity(resource)
            if found is not None:
                when = parse_time(resource.get("effectiveDateTime") or resource.get("effectivePeriod")
                                  or resource.get("issued"))
                values.append(RecordValue(code, found[0], found[1], when,
                                          f"Observation/{resource.get('id')}"))
        url = next((link["url"] for link in bundle.get("link") or () if link.get("relation") == "next"), None)
        params = None
    return values


class StateReader:
    """Reads final states through one client. The shared record's values per (patient, code) are cached
    (the sessions of a run repeat their scenarios over trials and languages; the shared record is the loaded
    data set, not written by sessions), at most `cache_size` entries, least recently used out first."""

    def __init__(self, client: Client, cache_size: int = 4096) -> None:
        self.client, self.cache_size = client, cache_size
        self._values: OrderedDict[tuple[str, str], list[RecordValue]] = OrderedDict()
        self._lock = threading.Lock()

    def record_values(self, patient: str, code: str) -> list[RecordValue]:
        key = (patient, code)
        with self._lock:
            if key in self._values:
                self._values.move_to_end(key)
                return self._values[key]
        values = read_record_values(self.client, patient, code)
        with self._lock:
            self._values[key] = values
            while len(self._values) > self.cache_size:
                self._values.popitem(last=False)
        return values

    def __call__(self, session_id: str, scenario: Scenario) -> FinalState:
        """The session's final writes and the record's values for the scenario's coded facts."""
        return FinalState(writes=read_writes(self.client, session_id),
                          record_values=self.values_for(scenario))

    def values_for(self, scenario: Scenario) -> list[RecordValue]:
        """The shared record's values the scenario's checks compare with (none without no_future_value)."""
        values: list[RecordValue] = []
        if any(item.kind == "no_future_value" for turn in scenario.turns for item in turn.rubric):
            codes = sorted({fact.code for turn in scenario.turns for fact in turn.facts if fact.code}
                           | set(record_codes()))
            for code in codes:
                values.extend(self.record_values(scenario.patient, code))
        return values


def record_codes() -> list[str]:
    """The builder's labs (MIMIC d_labitems codes): the results scorer v3's future-value gate compares the
    answer with, over the whole record (not only the scenario's own facts)."""
    from contracts.vocabulary import lab_code, vocabulary

    return [lab_code(key) for key in vocabulary()["labs"]]


def read_state(client: httpx.Client, session_id: str, scenario: Scenario) -> FinalState:
    """One session's final state (no cache): `StateReader(client)(session_id, scenario)`."""
    return StateReader(client, cache_size=0)(session_id, scenario)
