"""What every scorer version (versions.py) shares to score one turn: a rubric item judged by the check its
kind registers, the turn's exchanges as the report shows them, and its tool figures. Kept apart from
scorer.py so the versions do not import the module that dispatches to them."""

from __future__ import annotations

from datetime import datetime
from typing import Protocol

from contracts.scenario import RubricItem, Turn
from contracts.score import Exchange
from contracts.trajectory import TrajectoryTurn
from events.payloads import CdsExchange
from services.consumers.scoring.check_inputs import CheckContext, CheckResult
from services.consumers.scoring.checks.registry import check_of


class Judge(Protocol):
    model: str
    prompt_version: str

    def __call__(self, item: RubricItem, ctx: CheckContext) -> CheckResult: ...

    def describe(self) -> dict: ...


def check_item(item: RubricItem, ctx: CheckContext, judge: Judge | None) -> CheckResult | None:
    """One rubric item by its registered check (checks/registry.py), the judge for llm_judge; None: left
    out of the score. Version 3 judges the kinds it reads differently itself and every other kind here."""
    if item.kind == "llm_judge":
        return judge(item, ctx) if judge is not None else None
    if item.kind == "precision":
        return None  # a version-3 rule (v3/precision.py)
    check = check_of(item.kind)  # UnknownKind: the session is unscorable, with the kind named
    try:
        return check(item, ctx)
    except Exception as exc:  # noqa: BLE001 - a scenario bug fails its item, it never stops the run
        return CheckResult(False, f"check error: {type(exc).__name__}: {exc}")


def exchanges(log: TrajectoryTurn) -> list[Exchange]:
    """The turn as the per-session view shows it, in log order."""
    items: list[tuple[int, Exchange]] = []
    if log.doctor is not None:
        items.append((log.doctor.position, Exchange(kind="doctor", text=log.doctor.text,
                                                    sender=log.doctor.sender or None)))
    for m in log.messages:
        items.append((m.position, Exchange(kind="assistant" if m.kind == "answer" else m.kind, text=m.text,
                                           sender=m.sender or None)))
    for call in log.ehr:
        items.append((call.position, Exchange(kind="ehr", method=call.method, url=call.url,
                                              query=call.query or None, status=call.status,
                                              latency_ms=call.latency_ms)))
    for call in log.cds:
        cds = call.exchange
        items.append((call.position, Exchange(kind="cds", url=f"{cds.service} ({cds.hook})",
                                              text=cds_line(cds), status=cds.http_status,
                                              latency_ms=cds.latency_ms)))
    return [exchange for _, exchange in sorted(items, key=lambda pair: pair[0])]


def cds_line(cds: CdsExchange) -> str:
    """A CDS Hooks exchange as the per-session view lists it: the hook, then its cards, error or feedback."""
    head = f"{cds.hook} → {cds.service}: "
    if cds.outcome == "cards":
        cards = [f"{c.get('indicator')}: {c.get('summary')}" for c in cds.cards]
        actions = len(cds.system_actions)
        return head + ("; ".join(cards) or "no card") + (f" (+{actions} system actions)" if actions else "")
    if cds.outcome == "feedback":
        return head + "feedback " + ", ".join(str(f.get("outcome")) for f in cds.feedback)
    return head + f"{cds.outcome}: {cds.error}"


def turn_tools(turn: Turn, log: TrajectoryTurn) -> dict:
    """Tool metrics of one turn: FHIR calls, errors, resource types needed vs queried, patient questions."""
    refs = [ref for fact in turn.facts for ref in fact.sources]
    needed = {ref.split("/", 1)[0] for ref in refs}
    needed |= {w.resource_type for w in turn.writes}
    queried = {call.resource_type for call in log.ehr if call.resource_type}
    latencies = [call.latency_ms for call in log.ehr if call.latency_ms is not None]
    return {
        "fhir_calls": len(log.ehr),
        "fhir_errors": sum(1 for call in log.ehr if call.status is not None and call.status >= 400),
        "tool_calls": sum(1 for t in log.tools if t.event == "call"),
        "patient_questions": len(log.questions),
        "types_needed": sorted(needed),
        "types_queried": sorted(queried),
        "types_covered": len(needed & queried),
        "ehr_latency_ms": latencies,
        "answered": bool(log.answers),
        "turn_latency_ms": _elapsed_ms(log.doctor.time if log.doctor else None,
                                       log.answers[-1].time if log.answers else None),
    }


def _elapsed_ms(start: str | None, end: str | None) -> float | None:
    """Milliseconds from the doctor's message to the turn's answer, by the events' times."""
    if not start or not end:
        return None
    try:
        a, b = (datetime.fromisoformat(t.replace("Z", "+00:00")) for t in (start, end))
    except ValueError:
        return None
    return round((b - a).total_seconds() * 1000, 3)
