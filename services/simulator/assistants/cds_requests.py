"""What Rounds, as the EHR, sends a CDS Hooks 2.0 service and reads back: the hook request (context,
prefetch filled from the session's sandbox at its clock, fhirServer and fhirAuthorization), the checks on a
response's cards and systemActions, the text the physician reads, and the feedback on each card.
Data in data/cds_hooks.json; the adapter (cds_hooks.py) owns the calls and the events."""

from __future__ import annotations

import base64
import json
import re
import time
import uuid
from datetime import UTC, datetime
from functools import cache
from pathlib import Path
from typing import Any

from services.simulator.assistant_protocol import TurnRequest

TOKEN = re.compile(r"\{\{\s*([A-Za-z.]+)\s*\}\}")


class InvalidResponse(ValueError):
    """The service answered something CDS Hooks 2.0 does not allow (its fault)."""


@cache
def rules() -> dict[str, Any]:
    return json.loads((Path(__file__).parent / "data" / "cds_hooks.json").read_text())


def _id(reference: str | None) -> str | None:
    return reference.rsplit("/", 1)[-1] if reference else None


def draft_bundle(orders: tuple[dict, ...]) -> dict:
    """The physician's draft orders as the Bundle order-select/order-sign carry (status draft, ids given)."""
    entries = []
    for index, order in enumerate(orders):
        resource = {**order, "id": order.get("id") or f"draft-{index}"}
        if "status" in resource and resource["resourceType"] in ("MedicationRequest", "ServiceRequest"):
            resource["status"] = "draft"
        entries.append({"resource": resource})
    return {"resourceType": "Bundle", "type": "collection", "entry": entries}


def context(hook: str, request: TurnRequest) -> dict:
    """The hook's context fields (data: `context`) for this turn."""
    values: dict[str, Any] = {"userId": rules()["user"], "patientId": _id(request.patient),
                              "encounterId": _id(request.encounter)}
    if hook in ("order-select", "order-sign"):
        bundle = draft_bundle(request.draft_orders)
        values["draftOrders"] = bundle
        values["selections"] = [f"{e['resource']['resourceType']}/{e['resource']['id']}"
                                for e in bundle["entry"]]
    return {key: values[key] for key in rules()["context"][hook] if values.get(key) is not None}


def fill(template: str, ctx: dict) -> str | None:
    """A prefetch template with its tokens replaced from the context; None when a token has no value
    (the spec: the EHR then leaves that key out and the service fetches what it needs itself)."""
    missing = False

    def value(match: re.Match) -> str:
        nonlocal missing
        path = match.group(1)
        if path == "userPractitionerId":
            found: Any = _id(ctx.get("userId"))
        else:
            found = ctx
            for part in path.removeprefix("context.").split("."):
                found = found.get(part) if isinstance(found, dict) else None
        if not isinstance(found, str):
            missing = True
            return ""
        return found

    out = TOKEN.sub(value, template)
    return None if missing else out


def _claims(token: str) -> dict:
    """The claims a JWT carries, read without verifying it (the FHIR server verifies; Rounds only reports
    the token's scope, subject and lifetime to the service, as the spec asks)."""
    try:
        part = token.split(".")[1]
        claims = json.loads(base64.urlsafe_b64decode(part + "=" * (-len(part) % 4)))
    except (IndexError, ValueError):
        return {}
    return claims if isinstance(claims, dict) else {}


def authorization(request: TurnRequest) -> dict | None:
    """fhirAuthorization: the session's own token (its sandbox, its SMART scopes), when auth is on."""
    if not request.access_token:
        return None
    claims = _claims(request.access_token)
    expires = int(claims.get("exp", 0) - time.time()) if isinstance(claims.get("exp"), int | float) else 0
    out = {"access_token": request.access_token, "token_type": "Bearer", "expires_in": max(expires, 0),
           "scope": str(claims.get("scope", "")), "subject": str(claims.get("sub") or "rounds")}
    if request.patient:
        out["patient"] = _id(request.patient)
    return out


def body(hook: str, request: TurnRequest, ctx: dict, prefetch: dict) -> dict:
    out = {"hook": hook, "hookInstance": str(uuid.uuid4()), "fhirServer": request.fhir_base, "context": ctx}
    if prefetch:
        out["prefetch"] = prefetch
    if (auth := authorization(request)) is not None:
        out["fhirAuthorization"] = auth
    return out


def checked(answer: Any) -> tuple[list[dict], list[dict]]:
    """(cards, systemActions) of a response, or InvalidResponse saying what breaks CDS Hooks 2.0."""
    if not isinstance(answer, dict) or not isinstance(answer.get("cards"), list):
        raise InvalidResponse("the response has no `cards` array")
    indicators = rules()["indicators"]
    for n, card in enumerate(answer["cards"]):
        if not isinstance(card, dict):
            raise InvalidResponse(f"card {n} is not an object")
        if not isinstance(card.get("summary"), str) or not card["summary"]:
            raise InvalidResponse(f"card {n} has no summary")
        if card.get("indicator") not in indicators:
            raise InvalidResponse(f"card {n}: indicator {card.get('indicator')!r} is not one of {indicators}")
        if not isinstance((card.get("source") or {}).get("label"), str):
            raise InvalidResponse(f"card {n} has no source.label")
    actions = answer.get("systemActions") or []
    if not isinstance(actions, list):
        raise InvalidResponse("systemActions is not an array")
    return answer["cards"], actions


def rendered(hook: str, cards: list[dict]) -> list[str]:
    """What the physician reads of a hook's cards (the assistant's answer text of the turn)."""
    lines = []
    for card in cards:
        line = f"[{hook}] {card['indicator'].upper()}: {card['summary']}"
        if card.get("detail"):
            line += f" — {card['detail']}"
        for suggestion in card.get("suggestions") or ():
            line += f" (suggests: {suggestion.get('label', '')})"
        lines.append(line)
    return lines


def feedback(cards: list[dict]) -> list[dict]:
    """The physician's outcome per card (data: `feedback`), in the spec's feedback shape."""
    now = datetime.now(UTC).isoformat().replace("+00:00", "Z")
    reason = rules()["feedback"]["override_reason"]
    out = []
    for card in cards:
        if not card.get("uuid"):
            continue
        suggestions = [s for s in card.get("suggestions") or () if s.get("uuid")]
        chosen = next((s for s in suggestions if s.get("isRecommended")), next(iter(suggestions), None))
        if chosen is not None:
            out.append({"card": card["uuid"], "outcome": "accepted",
                        "acceptedSuggestions": [{"id": chosen["uuid"]}], "outcomeTimestamp": now})
        else:
            out.append({"card": card["uuid"], "outcome": "overridden", "overrideReason": {"reason": reason},
                        "outcomeTimestamp": now})
    return out
