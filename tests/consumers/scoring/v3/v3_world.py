"""Sessions of tests/consumers/scoring/world.py's scenario as the scorer's log model, built in memory (scorer
v3's unit
tests need no broker and no FHIR server: score_session is pure)."""

from __future__ import annotations

from contracts.trajectory import EhrCall, Trajectory, TrajectoryTurn, Utterance
from events.payloads import SessionEnded, SessionStarted
from services.consumers.scoring.check_inputs import FinalState, RecordValue, Written
from tests.consumers.scoring import world

IDS = {"patient": "p1", "cr": "cr1", "cr_old": "cr0", "glucose": "glu1"}
SCENARIO = world.scenario(IDS)
LAB = world.LABS


def record() -> list[RecordValue]:
    """The creatinine results: 1.1 and 1.8 before the clock, 2.6 after it; glucose 126."""
    from services.consumers.scoring.constraints import parse_time

    return [RecordValue(f"{LAB}|50912", 1.1, "mg/dL", parse_time("2150-02-20T08:00:00Z"), "Observation/cr0"),
            RecordValue(f"{LAB}|50912", 1.8, "mg/dL", parse_time("2150-02-28T08:00:00Z"), "Observation/cr1"),
            RecordValue(f"{LAB}|50912", 2.6, "mg/dL", parse_time("2150-03-09T08:00:00Z"), "Observation/cr9"),
            RecordValue(f"{LAB}|50931", 126, "mg/dL", parse_time("2150-02-28T08:00:00Z"), "Observation/glu1")]


def log(answers: dict[int, str] | None = None, *, given: tuple[str, ...] | None = ("Observation/cr1",
        "Observation/cr0", "Observation/glu1"), writes: dict[int, list[Written]] | None = None,
        disclosed: tuple[str, ...] = ("otc_nsaid",), language: str = "en") -> tuple[Trajectory, FinalState]:
    """One session: each turn's doctor message, one search whose response gave `given` (None: not logged),
    the patient's reply in turn 2 disclosing `disclosed`, `writes` per turn, and the answers (default: the
    reference answers)."""
    answers = answers or {}
    out = Trajectory("s1", started=SessionStarted(assistant="test", language=language, scenario=SCENARIO.id,
                                                  run_id="r"),
                     ended=SessionEnded(reason="completed", turns=len(SCENARIO.turns)))
    position, state = 0, FinalState(record_values=record())
    for turn in SCENARIO.turns:
        t = out.turns[turn.index] = TrajectoryTurn(turn.index)
        t.doctor = Utterance("doctor", turn.text.get(language, "explicit"), position, "d", sender="doctor")
        t.ehr.append(EhrCall("GET", "Observation", position + 1, 200, 1.0, {}, given))
        position += 2
        if turn.index == 2:
            t.messages.append(Utterance("question", "Any painkillers?", position, "q", sender="assistant"))
            t.messages.append(Utterance("patient", "Ibuprofen.", position + 1, "p", disclosed=disclosed,
                                        sender="patient"))
            position += 2
        for w in (writes or {}).get(turn.index, []):
            ref = f"{w.resource_type}/{w.id}"
            t.ehr.append(EhrCall("POST", w.resource_type, position, 201, 1.0, {}, (ref,)))
            state.writes.append(w)
            position += 1
        text = answers.get(turn.index, getattr(turn.answer, language))
        t.messages.append(Utterance("answer", text, position, "a", sender="assistant"))
        position += 1
    return out, state


def apixaban(id_: str = "m1", dose: float = 2.5, doses: int = 1) -> Written:
    resource = world.medication_request("p1", dose)
    resource["dosageInstruction"] = resource["dosageInstruction"] * doses if doses == 1 else [
        {**resource["dosageInstruction"][0], "doseAndRate": [{"doseQuantity": {"value": d, "unit": "mg"}}]}
        for d in [dose + i for i in range(doses)]]
    return Written("MedicationRequest", id_, 1, False, "POST", {**resource, "id": id_})
