"""Patient memory and persona for one session: what the patient knows, in their words (EN, ZH), each fact
traced to the FHIR resources it was derived from, and how they tell it (persona).

Facts are proposed from the whole chart (diagnoses -> conditions, symptoms, social history, allergies;
orders ->
medications, over-the-counter drugs, adherence; discharge notes -> social history), each with the aspects the
record answers (`answers`: a drug's dose, route and frequency from its latest order; since when a diagnosis
or its symptom has been there, from the first admission it was coded on; worded by
data/memory_answers.json), and then checked by
`verify`: a source must be a resource of this chart known at `now`; sources that are not are removed and a
fact left with none is dropped (the count goes into the build summary). Nothing the patient says is invented
beyond the record: symptoms are the curated symptom wording of a recorded diagnosis."""

from __future__ import annotations

import json
import random
from collections.abc import Iterable
from datetime import datetime
from functools import cache, lru_cache
from pathlib import Path

from contracts.scenario import MemoryFact, Persona
from contracts.vocabulary import phrase as phrasing
from services.simulator.scenarios import vocabulary as vocab
from services.simulator.scenarios.chart import Chart, Med
from services.simulator.scenarios.templates import render

MAX_MEDS = 6
MAX_SOURCES = 3  # the most recent sources a fact keeps (a diagnosis coded at every admission)


def persona(rng: random.Random) -> Persona:
    return Persona(
        health_literacy=rng.choice(["high", "medium", "medium", "low"]),
        adherence=rng.choice(["good", "good", "partial", "poor"]),
        anxiety=rng.choice(["low", "low", "medium", "high"]),
        completeness=rng.choice(["complete", "complete", "partial", "critical_withheld"]),
    )


def _topics(*groups: Iterable[str]) -> list[str]:
    seen: list[str] = []
    for group in groups:
        for word in group:
            if word and word not in seen:
                seen.append(word)
    return seen


def _fact(
    fid: str, category: str, en: str, zh: str, topics_en, topics_zh, sources, lay=None, answers=None
) -> dict:
    fact = {
        "id": fid,
        "category": category,
        "topics": {"en": _topics(topics_en), "zh": _topics(topics_zh)},
        "text": {"en": en, "zh": zh},
        "sources": list(sources),
    }
    if lay:
        fact["lay"] = {"en": lay[0], "zh": lay[1]}
    if answers:
        fact["answers"] = answers
    return fact


@cache
def answer_words() -> dict:
    return json.loads((Path(__file__).parent / "data" / "memory_answers.json").read_text(encoding="utf-8"))


def _answer(aspect: str, values: dict) -> dict:
    """One aspect's answer (medium and low literacy, EN and ZH) from data/memory_answers.json."""
    template = answer_words()[aspect]
    forms = ("text", "lay")
    return {form: {lang: render(words, values) for lang, words in template[form].items()} for form in forms}


def _med_answers(entry: dict, med: Med) -> dict:
    """The dose, route and frequency the drug's latest order records; an aspect it lacks is left out."""
    words, answers = answer_words(), {}
    if med.dose is not None and med.dose_unit:
        answers["dose"] = _answer("dose", {**entry, "dose": f"{med.dose:g}", "unit": med.dose_unit})
    how = [words[table][code] for table, code in (("routes", med.route), ("frequencies", med.frequency))
           if code in words[table]]
    if how:
        values = {**entry, "how_en": ", ".join(h[0] for h in how), "how_zh": "，".join(h[1] for h in how)}
        answers["schedule"] = _answer("schedule", values)
    return answers


def _since(chart: Chart, key: str, now: datetime) -> dict:
    """Since when a diagnosis has been there: the start of the first admission it was coded on, among the
    codes known at `now` (a stay's codes are billed at its discharge)."""
    starts = {e.ref: e.start for e in chart.encounters}
    known = [
        starts[c.encounter]
        for c in chart.conditions
        if c.key == key and c.known is not None and c.known <= now and c.encounter in starts
    ]
    if not known:
        return {}
    first = min(known)
    month_en = answer_words()["months_en"][first.month - 1]
    return {"since": _answer("since", {"year": first.year, "month": first.month, "month_en": month_en})}


def _said(key: str, entry: dict) -> tuple[str, str]:
    """A memory phrase (contracts' vocabulary) filled with a vocabulary entry's names: (EN, ZH)."""
    template = phrasing(key)
    return render(template["en"], entry), render(template["zh"], entry)


def propose(chart: Chart, adherence: str, now: datetime) -> list[dict]:
    """Candidate facts from the whole chart (diagnoses and notes of any time; the most recent orders placed
    by `now`), in a stable order, before verification."""
    out: list[dict] = []
    by_key: dict[str, list[str]] = {}
    for cond in chart.conditions:
        by_key.setdefault(cond.key, []).append(cond.ref)
    for key in sorted(by_key):
        entry, refs = vocab.condition(key), by_key[key]
        topics_en = [entry["en"], entry["lay_en"], *entry["topics_en"]]
        topics_zh = [entry["zh"], entry["lay_zh"], *entry["topics_zh"]]
        if entry.get("social"):
            out.append(
                _fact(
                    f"social-{key}",
                    "social",
                    entry["social_en"],
                    entry["social_zh"],
                    topics_en,
                    topics_zh,
                    refs,
                )
            )
        elif entry.get("allergy_class"):
            out.append(
                _fact(
                    f"allergy-{key}",
                    "allergy",
                    entry["allergy_en"],
                    entry["allergy_zh"],
                    topics_en,
                    topics_zh,
                    refs,
                )
            )
        else:
            since = _since(chart, key, now)
            out.append(
                _fact(
                    f"condition-{key}",
                    "condition",
                    *_said("condition", entry),
                    topics_en,
                    topics_zh,
                    refs,
                    lay=_said("condition_lay", entry),
                    answers=since,
                )
            )
            if entry.get("symptom_en"):
                out.append(
                    _fact(
                        f"symptom-{key}",
                        "symptom",
                        entry["symptom_en"],
                        entry["symptom_zh"],
                        entry["topics_en"],
                        entry["topics_zh"],
                        refs,
                        answers=since,
                    )
                )
    meds: dict[str, list[str]] = {}
    latest: dict[str, Med] = {}  # each drug's most recent order placed by `now`
    for med in sorted(chart.meds, key=lambda m: (m.authored, m.ref), reverse=True):
        home = med.key and not vocab.drug(med.key).get("inpatient")
        if home and med.authored <= now and (med.key in meds or len(meds) < MAX_MEDS):
            meds.setdefault(med.key, []).append(med.ref)
            latest.setdefault(med.key, med)
    adherence_done = False
    for key in sorted(meds):
        entry, refs = vocab.drug(key), sorted(meds[key])
        otc = entry.get("otc", False)
        topics_en = [entry["en"], entry["lay_en"], *phrasing("topics_medication")["en"]]
        topics_zh = [entry["zh"], entry["lay_zh"], *phrasing("topics_medication")["zh"]]
        en, zh = _said("otc" if otc else "medication", entry)
        out.append(
            _fact(
                f"{'otc' if otc else 'medication'}-{key}",
                "otc" if otc else "medication",
                en,
                zh,
                topics_en,
                topics_zh,
                refs,
                answers=_med_answers(entry, latest[key]),
            )
        )
        if not otc and not adherence_done:
            adherence_done = True
            topics = phrasing("topics_adherence")
            out.append(
                _fact(
                    f"adherence-{key}",
                    "adherence",
                    *_said(f"adherence_{adherence}", entry),
                    [entry["en"], entry["lay_en"], *topics["en"]],
                    [entry["zh"], entry["lay_zh"], *topics["zh"]],
                    refs,
                )
            )
    social = {k: v for k, v in vocab.vocabulary()["social_history"].items() if k != "_doc"}
    for note in chart.notes:
        section = note.text.lower().split("social history:", 1)
        if len(section) < 2:
            continue
        body = section[1].split("\n\n", 1)[0]
        for phrase in sorted(social):
            if phrase in body:
                out.append(
                    _fact(
                        f"social-note-{phrase.replace(' ', '_')}",
                        "social",
                        social[phrase]["en"],
                        social[phrase]["zh"],
                        phrasing("topics_home")["en"],
                        phrasing("topics_home")["zh"],
                        [note.ref],
                    )
                )
    return out


def verify(candidates: list[dict], chart: Chart, now: datetime) -> tuple[list[dict], int, int]:
    """Keep the sources that are this chart's resources known at `now`; drop facts left without any.
    Returns (kept, facts dropped, sources removed). The first fact with a given id wins; a fact keeps its
    MAX_SOURCES most recent sources."""
    kept, dropped, removed, ids = [], 0, 0, set()
    for fact in candidates:
        sources = [
            s
            for s in fact["sources"]
            if s in chart.references and (t := chart.references[s]) is not None and t <= now
        ]
        removed += len(fact["sources"]) - len(sources)
        if not sources or fact["id"] in ids:
            dropped += 1
            continue
        ids.add(fact["id"])
        latest = sorted(sources, key=lambda s: (chart.references[s], s))[-MAX_SOURCES:]
        kept.append({**fact, "sources": sorted(latest)})
    return kept, dropped, removed


def finalize(facts: list[dict], critical_ids: set[str]) -> list[MemoryFact]:
    return [
        _validated(json.dumps(f, sort_keys=True, ensure_ascii=False), f["id"] in critical_ids) for f in facts
    ]


@lru_cache(maxsize=65536)
def _validated(fact_json: str, critical: bool) -> MemoryFact:
    """Sessions of one patient share most facts: each distinct fact is validated once (models are frozen)."""
    return MemoryFact.model_validate({**json.loads(fact_json), "critical": critical})
