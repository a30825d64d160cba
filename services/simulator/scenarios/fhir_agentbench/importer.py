"""FHIR-AgentBench's questions -> Rounds sessions, against the loaded record.

Like the peer's own validation step, gold ids the record does not hold are dropped from the truth and
counted (by resource type); a question whose patient is absent, or that the peer marks not mappable to FHIR,
is skipped and counted (by reason). The summary carries those counts, the sessions by main table, and the
gold kept by type. The file is read and checked whole first (rows.py): a bad row stops the import before
anything is read from the record or written.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Any

from contracts.scenario import Scenario
from services.simulator.scenarios import fhir_client
from services.simulator.scenarios.fhir_agentbench.record import clock_after, held, newest, patient_exists
from services.simulator.scenarios.fhir_agentbench.rows import Question
from services.simulator.scenarios.fhir_agentbench.sessions import session

SKIPS = {
    "patient_absent": "the record holds no Patient with the question's patient_fhir_id",
    "not_mappable": "the peer marks the question not mappable to FHIR (mappable_to_fhir False)",
    "no_clock": "no resource of the patient ever becomes known (no session clock shows the record)",
}


@dataclass
class Imported:
    scenarios: list[Scenario]
    summary: dict[str, Any]


async def import_questions(source: Any, questions: list[Question], timeout: float = 120.0) -> Imported:
    """The sessions of `questions` on the record at `source` (a base URL, an ASGI app, an AsyncClient)."""
    skipped: Counter[str] = Counter()
    listed: Counter[str] = Counter()
    kept_by_type: Counter[str] = Counter()
    dropped: Counter[str] = Counter()
    by_table: Counter[str] = Counter()
    scenarios: list[Scenario] = []
    patients: dict[str, list[dict] | None] = {}
    async with fhir_client(source, timeout) as client:
        for q in questions:
            for kind, ids in q.gold_ids.items():
                listed[kind] += len(ids)
            if not q.mappable:
                skipped["not_mappable"] += 1
                continue
            if q.patient not in patients:
                exists = await patient_exists(client, q.patient)
                patients[q.patient] = await newest(client, q.patient) if exists else None
            record = patients[q.patient]
            if record is None:
                skipped["patient_absent"] += 1
                continue
            kept: dict[str, list[str]] = {}
            gold_resources: list[dict] = []
            for kind, ids in q.gold_ids.items():
                found = await held(client, kind, ids)
                kept[kind] = [i for i in ids if i in found]
                gold_resources += list(found.values())
                kept_by_type[kind] += len(kept[kind])
                dropped[kind] += len(ids) - len(kept[kind])
            now = clock_after(record + gold_resources)
            if now is None:
                skipped["no_clock"] += 1
                continue
            scenarios.append(session(q, {k: v for k, v in kept.items() if v}, now))
            by_table[q.main_table] += 1
    summary = {
        "benchmark": "FHIR-AgentBench", "questions": len(questions), "sessions": len(scenarios),
        "skipped": {reason: skipped.get(reason, 0) for reason in SKIPS},
        "skip_reasons": SKIPS,
        "by_table": dict(sorted(by_table.items())),
        "gold_ids": {"listed": dict(sorted(listed.items())), "kept": dict(sorted(kept_by_type.items())),
                     "dropped_absent_from_record": {k: v for k, v in sorted(dropped.items()) if v}},
        "patients": {"asked": len(patients), "absent": sum(1 for v in patients.values() if v is None)},
    }
    return Imported(scenarios, summary)
