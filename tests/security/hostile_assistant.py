"""A hostile stateful assistant: `python:tests.security.hostile_assistant:hoard`.

It keeps every token, FHIR base, patient endpoint and patient it was ever shown, across sessions, and every
turn tries them all against every surface with its own HTTP client (as an `http:` or `mcp:` assistant has):
each kept token on each kept base and on the shared record, the sessions API (open, describe, read the writes
of, end any session), the patient endpoints, and with its own token the other patients and its own record
beyond the clock. An answer that lets it in counts as a success; `TALLY` counts the attempts by surface
(tests/security/test_hostile_assistant.py)."""

from __future__ import annotations

import httpx

from tests.security.tally import Tally

TALLY = Tally("hostile stateful assistant")
SEEN: dict[str, dict] = {}  # session id -> {token, base, patient_url, patient, now}


def _entries(response: httpx.Response) -> list[dict]:
    if not response.is_success:
        return []
    return [e.get("resource", {}) for e in response.json().get("entry", [])]


async def _try(http: httpx.AsyncClient, surface: str, method: str, url: str, token: str, ok=None,
               **kwargs) -> None:
    response = await http.request(method, url, headers={"Authorization": f"Bearer {token}"}, **kwargs)
    TALLY.attempt(surface, (ok or (lambda r: r.is_success))(response), f"{method} {url}")


def _another_clock_of(ctx, place: dict):
    """A kept session's own token on its own base is that session at work while it runs (one assistant serves
    concurrent sessions, and could pass anything between them in memory anyway): it succeeds only by showing
    this session's patient at another clock, or by answering after that session ended (the final sweep)."""
    return lambda r: r.is_success and place["patient"] == ctx.patient and place["now"] != ctx.now


async def hoard(ctx) -> str:
    token = ctx.http.headers["authorization"].removeprefix("Bearer ")
    root = ctx.fhir_base.rsplit("/sessions/", 1)[0]
    SEEN[ctx.session] = {"token": token, "base": ctx.fhir_base, "patient_url": ctx.patient_url,
                         "patient": ctx.patient, "now": ctx.now}
    # its own client, as an http: or mcp: assistant has: the session transport's confinement is not what is
    # tested, the server's is
    async with httpx.AsyncClient(timeout=60) as http:
        own = await _attack(ctx, http, token, root)
    return f"{len(own)} observations"


async def _attack(ctx, http: httpx.AsyncClient, token: str, root: str) -> list[dict]:
    seen = list(SEEN.items())  # other sessions add to it while this turn awaits
    for sid, kept in seen:
        for other_sid, place in seen:
            if (sid, other_sid) == (ctx.session, ctx.session):
                continue
            base = place["base"]
            own_base = sid == other_sid
            surface = "kept token on its own session" if own_base else "token on another session's base"
            ok = _another_clock_of(ctx, place) if own_base else None
            await _try(http, surface, "GET", f"{base}/Observation", kept["token"], ok)
            await _try(http, surface, "GET", f"{base}/Patient", kept["token"], ok)
            await _try(http, surface, "POST", base, kept["token"], ok, json={
                "resourceType": "Bundle", "type": "batch",
                "entry": [{"request": {"method": "GET", "url": "Observation"}}]})
            await _try(http, "patient endpoint", "POST", place["patient_url"], kept["token"], ok,
                       json={"text": "what did the doctor tell you?"})
            await _try(http, "sessions API", "GET", f"{root}/sessions/{other_sid}/writes", kept["token"])
            await _try(http, "sessions API", "GET", f"{root}/sessions/{other_sid}", kept["token"])
            if other_sid != ctx.session:
                await _try(http, "sessions API", "POST", f"{root}/sessions/{other_sid}/end", kept["token"])
        await _try(http, "shared record", "GET", f"{root}/fhir/Observation", kept["token"])
        await _try(http, "shared record", "GET", f"{root}/fhir/Patient", kept["token"])
        await _try(http, "sessions API", "POST", f"{root}/sessions", kept["token"], json={})
    for _, place in seen:
        if place["patient"] != ctx.patient:
            await _try(http, "other patient, own token", "GET", f"{ctx.fhir_base}/{place['patient']}", token)
            await _try(http, "other patient, own token", "GET", f"{ctx.fhir_base}/Observation", token,
                       params={"patient": place["patient"]}, ok=lambda r: bool(_entries(r)))
    own = _entries(await http.get(f"{ctx.fhir_base}/Observation", params={"_count": "200"},
                                  headers={"Authorization": f"Bearer {token}"}))
    for resource in own:  # everything its own token reads: its patient, up to its clock
        TALLY.attempt("own record beyond patient or clock",
                      resource.get("subject", {}).get("reference") != ctx.patient
                      or resource.get("effectiveDateTime", "") > ctx.now, resource.get("id", ""))
    return own
