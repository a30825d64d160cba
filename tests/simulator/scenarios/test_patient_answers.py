"""A patient who answers what is asked, measured on the real demo: a test set of questions built from the
record (each patient's orders, diagnoses and allergies as the sandbox shows them at the scenario's `now`),
asked in EN and ZH to the patient of a demo scenario at its persona's literacy.

On-record questions (the dose an order carries, since when a coded diagnosis has been there, an allergy the
record codes) must be answered with the record's value (the dose's number, the first admission's year, the
allergy fact): ≥ 90 %. Off-record ones (a dose the order does not carry, a drug, diagnosis or allergy the
record does not hold) must be declined: 100 %. Truth comes from the store, not from the memory's answers.
The figures are printed (benchmarks/README.md records them).
"""

from __future__ import annotations

from collections import Counter

import orjson
import pytest

from contracts.scenario import MemoryFact, Scenario
from contracts.vocabulary import vocabulary
from services.fhir_api.search.values import date_range
from services.fhir_api.store.interface import Context, SearchRequest
from services.simulator.agents.patient import PatientAgent, generic_topics
from services.simulator.scenarios import vocabulary as vocab
from tests.wiring import store_on

DOSE = {"en": "What dose of {en} do you take?", "zh": "{zh}你一次吃多少剂量？"}
SINCE = {"en": "How long have you had {en}?", "zh": "你的{zh}是从什么时候开始的？"}
ALLERGY_NAMED = {"en": "Are you allergic to {topic}?", "zh": "你对{topic}过敏吗？"}
ALLERGY_ANY = {"en": "Do you have any allergies?", "zh": "你有什么过敏吗？"}


def _entries(table: str) -> dict[str, dict]:
    return {k: v for k, v in vocabulary()[table].items() if not k.startswith("_")}


def _specific(entry: dict, language: str) -> str:
    return next(t for t in entry[f"topics_{language}"] if t.lower() not in generic_topics())


class Record:
    """What the sandbox shows of one patient at one clock (the truth of the questions)."""

    def __init__(self, store, scenario: Scenario) -> None:
        self.store, self.ctx = store, Context(session_id=None, now=scenario.now)
        self.patient = scenario.patient.removeprefix("Patient/")

    def read(self, ref: str) -> dict:
        rtype, rid = ref.split("/")
        return orjson.loads(self.store.read(self.ctx, rtype, rid).raw)

    def dose(self, fact: MemoryFact) -> str | None:
        """The dose of the fact's latest order, as the patient would say it ('25'), if the order has one."""
        orders = sorted((self.read(ref) for ref in fact.sources), key=lambda r: r.get("authoredOn", ""))
        dosage = (orders[-1].get("dosageInstruction") or [{}])[0]
        quantity = ((dosage.get("doseAndRate") or [{}])[0]).get("doseQuantity") or {}
        has = quantity.get("value") is not None and quantity.get("unit")
        return f"{float(quantity['value']):g}" if has else None

    def first_year(self, key: str) -> int | None:
        """The year the first admission began on which a diagnosis of `key` was coded (and is known now)."""
        request = SearchRequest("Condition", [("patient", self.patient)], count=1000)
        found = self.store.search(self.ctx, request)
        starts = []
        for item in found.matches:
            condition = orjson.loads(item.raw)
            coding = (condition.get("code", {}).get("coding") or [{}])[0]
            if vocab.condition_key(coding.get("system", ""), coding.get("code", "")) == key:
                start = self.read(condition["encounter"]["reference"])["period"]["start"]
                starts.append((date_range(start)[0], int(start[:4])))  # the year in the record's local time
        return min(starts)[1] if starts else None


def _questions(record: Record, scenario: Scenario) -> list[tuple[str, str, bool, dict, str | None]]:
    """(kind, question key, on record, names, what an answer must say) for one scenario's patient."""
    held = {f.id for f in scenario.patient_memory}
    topics = {t.lower() for f in scenario.patient_memory for ts in f.topics.values() for t in ts}

    allergies = [f for f in scenario.patient_memory if f.category == "allergy"]
    allergic = {t.lower() for f in allergies for ts in f.topics.values() for t in ts}

    def unheld_allergy(entry: dict) -> bool:  # no allergy fact the patient holds names its words
        words = {w.lower() for w in entry.get("topics_en", []) + entry.get("topics_zh", [])}
        return not (words - generic_topics()) & allergic

    def unheld(entry: dict) -> bool:  # none of its own words is a topic of a fact the patient holds
        words = [entry.get(k, "") for k in ("en", "zh", "lay_en", "lay_zh")]
        words += entry.get("topics_en", []) + entry.get("topics_zh", [])
        return not ({w.lower() for w in words if w} - generic_topics()) & topics
    out = []
    for fact in scenario.patient_memory:
        kind, _, key = fact.id.partition("-")
        if fact.category in ("medication", "otc"):
            dose = record.dose(fact)
            out.append(("dose", "DOSE", dose is not None, vocab.drug(key), dose))
        elif fact.category == "symptom":
            year = record.first_year(key)
            out.append(("symptom-timing", "SINCE", year is not None, vocab.condition(key), str(year)))
        elif fact.category == "allergy":
            entry = vocab.condition(key)
            out.append(("allergy", "ALLERGY_ANY", True, entry, fact.id))
            out.append(("allergy", "ALLERGY_NAMED", True, entry, fact.id))
    home = [k for k, e in _entries("drugs").items() if not e.get("inpatient")]
    for key in [k for k in home if unheld(vocab.drug(k))][:3]:
        out.append(("dose", "DOSE", False, vocab.drug(key), None))
    conditions = _entries("conditions")
    for key in [k for k, e in conditions.items() if e.get("symptom_en") and unheld(e)][:2]:
        out.append(("symptom-timing", "SINCE", False, conditions[key], None))
    for key, entry in conditions.items():
        if entry.get("allergy_class") and f"allergy-{key}" not in held and unheld_allergy(entry):
            out.append(("allergy", "ALLERGY_NAMED", False, entry, None))
    if not any(f.category == "allergy" for f in scenario.patient_memory):
        out.append(("allergy", "ALLERGY_ANY", False, {}, None))
    return out


@pytest.mark.timeout(1800)
def test_the_patient_answers_what_the_record_holds_and_declines_the_rest(demo_build, demo_url) -> None:
    store = store_on(demo_url)
    patients: dict[str, Scenario] = {}
    for scenario in demo_build.scenarios:  # one scenario per patient: its memory, persona and clock
        if scenario.patient_memory and scenario.patient not in patients:
            patients[scenario.patient] = scenario
    asked: Counter = Counter()
    good: Counter = Counter()
    failures = []
    for scenario in patients.values():
        record = Record(store, scenario)
        for kind, template, on_record, entry, expected in _questions(record, scenario):
            for language in ("en", "zh"):
                words = globals()[template][language]
                topic = _specific(entry, language) if entry.get(f"topics_{language}") else ""
                question = words.format(topic=topic, **{k: v for k, v in entry.items() if isinstance(v, str)})
                reply = PatientAgent(scenario, language).answer(question)
                side = "on" if on_record else "off"
                asked[(kind, side, language)] += 1
                if on_record:
                    ok = reply.matched and (expected in reply.disclosed or expected in reply.text)
                else:
                    ok = not reply.matched and reply.disclosed == ()
                good[(kind, side, language)] += ok
                if not ok:
                    failures.append((side, language, question, reply.text))
    store.engine.dispose()

    def share(side: str) -> tuple[int, int]:
        keys = [k for k in asked if k[1] == side]
        return sum(good[k] for k in keys), sum(asked[k] for k in keys)

    print(f"\n{len(patients)} demo patients, questions built from their records:")
    for key in sorted(asked):
        print(f"  {key[0]:>15} {key[1]}-record {key[2]}: {good[key]}/{asked[key]}")
    (on_good, on_all), (off_good, off_all) = share("on"), share("off")
    print(f"  answered {on_good}/{on_all} on-record ({100 * on_good / on_all:.1f} %), "
          f"declined {off_good}/{off_all} off-record ({100 * off_good / off_all:.1f} %)")
    for failure in failures[:10]:
        print("  missed:", failure)
    assert on_all > 100 and off_all > 100
    assert on_good >= 0.9 * on_all, failures[:5]
    assert off_good == off_all, [f for f in failures if f[0] == "off"][:5]
