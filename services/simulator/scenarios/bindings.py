"""Evaluating a definition's bindings for one candidate moment: each binding kind is one function over the
chart as of `now` (truth.py does the arithmetic). The families name kinds; they never carry code."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from functools import cache
from pathlib import Path
from typing import Any

from contracts.vocabulary import label, listing
from services.simulator.scenarios import truth as T
from services.simulator.scenarios import vocabulary as vocab
from services.simulator.scenarios.chart import Chart, Isolate, Med
from services.simulator.scenarios.families import Binding

DATA = Path(__file__).parent / "data"


@cache
def rules() -> dict[str, Any]:
    return json.loads((DATA / "rules.json").read_text(encoding="utf-8"))


def conclusion(outcome: str) -> str:
    """What an outcome concludes for `conclusion` rubric items: yes/no, or a trend's direction."""
    return rules()["conclusions"][outcome]


@dataclass
class Moment:
    """A candidate: a patient, the clock, and what the anchor picked (a lab key, an order, an isolate...)."""

    chart: Chart
    now: datetime
    lab: str | None = None
    med: Med | None = None
    isolate: Isolate | None = None
    encounter: str | None = None
    anchor_value: float | None = None
    context: dict[str, Any] = field(default_factory=dict)  # the definition's constants
    values: dict[str, T.Truth] = field(default_factory=dict)


def _lab_of(b: Binding, m: Moment) -> str:
    key = b.lab or m.lab
    if key and key.startswith("$"):
        key = m.context[key[1:]]
    if key is None:
        raise ValueError(f"binding {b.name}: no lab (the anchor has none)")
    return key


def _time_of(truth: T.Truth) -> datetime | None:
    return truth.time


def _latest(b: Binding, m: Moment) -> T.Truth:
    key = _lab_of(b, m)
    if b.of:
        after = _time_of(m.values[b.of])
        series = [x for x in T.known(m.chart, key, m.now) if after is not None and x.effective > after]
        pick = max(series, key=T.chart_order) if series else None
        return T.lab_truth("latest", pick, key)
    bounds = (m.now - timedelta(hours=b.hours), m.now) if b.hours is not None else None
    return T.lab_truth("latest", T.latest(m.chart, key, m.now, b.hours), key, bounds)


def _previous(b: Binding, m: Moment) -> T.Truth:
    ref_truth = m.values[b.of or ""]
    key = _lab_of(b, m)
    lab = ref_truth.extra.get("_lab")
    if lab is None:
        return T.lab_truth("value_at", None, key)
    before = [x for x in T.known(m.chart, key, m.now) if T.chart_order(x) < T.chart_order(lab)]
    return T.lab_truth("value_at", max(before, key=T.chart_order, default=None), key)


def _value_at(b: Binding, m: Moment) -> T.Truth:
    """The result known when the `of` event happened (a dose given, an order started); `at_event` names that
    event, so "the value before we gave that" is traceable to the dose."""
    key = _lab_of(b, m)
    event = m.values[b.of or ""]
    when = _time_of(event)
    pick = T.latest(m.chart, key, when) if when else None
    found = T.lab_truth("value_at", pick, key)
    if pick is not None and event.refs:
        found.extra["at_event"] = event.refs[0]
    return found


def _aggregate(b: Binding, m: Moment) -> T.Truth:
    return T.aggregate(b.kind, m.chart, _lab_of(b, m), m.now, b.hours or 24)


def _exists(b: Binding, m: Moment) -> T.Truth:
    key = _lab_of(b, m)
    hours = b.hours if b.hours is not None else (b.days or 0) * 24 or None
    pick = T.latest(m.chart, key, m.now, hours)
    found = T.lab_truth("exists", pick, key)
    if pick is None:
        return found
    found.value = True
    return found


def _decision(b: Binding, m: Moment) -> T.Truth:
    rule = rules()[b.rule or ""]
    source = m.values[b.input or ""]
    number = float(source.value) if source.present and isinstance(source.value, int | float) else None
    if rule["type"] == "tiers":
        out = T.tiers(rule, number)
    elif rule["type"] == "linear":
        out = T.linear(rule, number)
    elif rule["type"] == "age":
        out = T.age_rule(rule, source.time if source.present else None, m.now)
    elif rule["type"] == "egfr":
        threshold = vocab.drug(m.med.key)["renal"] if m.med and m.med.key else None
        if number is None or threshold is None:
            out = {"outcome": "no_adjust"}
        else:
            out = {
                "outcome": rule["outcome_below"] if number < threshold else rule["outcome_else"],
                "threshold": threshold,
            }
    else:
        raise ValueError(f"rule {b.rule}: unknown type {rule['type']}")
    outcome = out.pop("outcome")
    if "dose" in out and "hours" in out:
        out["rate"] = round(out["dose"] / out["hours"], 3)
    return T.Truth(
        kind="decision",
        value=outcome,
        # no input value: the decision rests on the record holding none (over the input's window)
        refs=list(source.refs) or [m.chart.patient],
        code=f"urn:rounds:rule|{b.rule}",
        unit=out.pop("unit", None),
        window=source.window,
        label=rule["label"],
        extra={**out, "rule": b.rule},
    )


def _egfr(b: Binding, m: Moment) -> T.Truth:
    return T.egfr_truth(m.chart, m.values[b.input or ""], m.now)


def _age(b: Binding, m: Moment) -> T.Truth:
    age = m.chart.age_at(m.now)
    return T.Truth(
        kind="value_at",
        value=age,
        unit="years",
        time=m.now,
        refs=[m.chart.patient],
        code="urn:rounds:derived|age",
        label=label("age"),
        present=age is not None,
    )


def _demographics(b: Binding, m: Moment) -> T.Truth:
    c = m.chart
    return T.Truth(
        kind="value_at",
        value=c.mrn,
        refs=[c.patient],
        code="http://mimic.mit.edu/fhir/mimic/identifier/patient",
        label=label("mrn"),
        present=bool(c.mrn and c.birth_date),
        extra={"name": c.name, "birth_date": c.birth_date.isoformat() if c.birth_date else None},
    )


def _drug_truth(ref: str, key: str | None, name: str, when: datetime | None, **extra: Any) -> T.Truth:
    """A drug as a fact: an order (its start) or a dose given (its time), named by the vocabulary."""
    entry = vocab.drug(key) if key else {"en": name, "zh": name}
    return T.Truth(
        kind="exists",
        value=True,
        time=when,
        refs=[ref],
        code=f"urn:rounds:drug|{key}",
        label={"en": entry["en"], "zh": entry["zh"]},
        extra={"name": name, **extra},
    )


def _med_truth(med: Med) -> T.Truth:
    return _drug_truth(
        med.ref, med.key, med.name, med.start, dose=med.dose, dose_unit=med.dose_unit, route=med.route
    )


def _anchor_med(b: Binding, m: Moment) -> T.Truth:
    if m.med is None:
        raise ValueError(f"binding {b.name}: the anchor picked no order")
    return _med_truth(m.med)


def _administration(b: Binding, m: Moment) -> T.Truth:
    """The last dose of the anchor's drug given in its stay before the result `of` was drawn (the MAR's
    MedicationAdministration: "before we gave that" refers to it); absent when the MAR shows none, so a
    treatment-response session is built only where a dose was given."""
    if m.med is None:
        raise ValueError(f"binding {b.name}: the anchor picked no order")
    drawn = m.values[b.of or ""].time if b.of else m.now
    given = [
        a
        for a in m.chart.administrations
        if a.key == m.med.key and a.encounter == m.med.encounter and drawn is not None and a.time < drawn
    ]
    if not given:
        return T.Truth(kind="absent", value=True, refs=[m.med.ref], present=False)
    dose = given[-1]
    return _drug_truth(dose.ref, dose.key, dose.name, dose.time, dose=dose.dose, dose_unit=dose.dose_unit)


def _active(m: Moment) -> list[Med]:
    return [x for x in m.chart.meds if x.key and x.active_at(m.now)]


def _class_duplicates(b: Binding, m: Moment) -> T.Truth:
    mine = vocab.drug(m.med.key)["class"]  # type: ignore[union-attr]
    others = sorted(
        {x.key: x for x in _active(m) if x.key != m.med.key and vocab.drug(x.key)["class"] == mine}.items()
    )  # type: ignore[union-attr]
    names = [vocab.drug(k) for k, _ in others]
    return T.Truth(
        kind="decision",
        value="duplicate" if others else "no_duplicate",
        refs=[m.med.ref, *(x.ref for _, x in others)],
        code="urn:rounds:rule|duplicate_therapy",  # type: ignore[union-attr]
        label=label("duplicate_therapy"),
        extra={
            "class": mine,
            "others_en": listing(names, "en"),
            "others_zh": listing(names, "zh"),
        },
    )


def _allergy(b: Binding, m: Moment) -> T.Truth:
    drug_class = vocab.drug(m.med.key)["class"]  # type: ignore[union-attr]
    hits = [
        c
        for c in m.chart.conditions
        if c.known is not None
        and c.known <= m.now
        and drug_class in vocab.condition(c.key).get("allergy_class", ())
    ]
    entry = vocab.condition(hits[-1].key) if hits else None
    return T.Truth(
        kind="decision",
        value="conflict" if hits else "no_conflict",
        refs=[m.med.ref, *(c.ref for c in hits[-1:])],
        code="urn:rounds:rule|allergy_conflict",  # type: ignore[union-attr]
        label=label("allergy_check"),
        extra={"allergy_en": (entry or label("none"))["en"], "allergy_zh": (entry or label("none"))["zh"]},
    )


def _isolate(b: Binding, m: Moment) -> T.Truth:
    iso = m.isolate
    if iso is None:
        raise ValueError(f"binding {b.name}: the anchor picked no isolate")
    names = vocab.organism_names(iso.organism)
    return T.Truth(
        kind="exists",
        value=True,
        time=iso.collected,
        refs=[iso.ref],
        code="urn:rounds:organism|" + iso.organism,
        label={"en": names["en"], "zh": names["zh"]},
        extra={
            "organism_en": names["en"],
            "organism_zh": names["zh"],
            "organism_key": names["key"],
            "specimen": iso.specimen or "",
        },
    )


def _susceptibility(b: Binding, m: Moment) -> T.Truth:
    iso = m.isolate
    want = "S" if b.kind == "susceptible" else "R"
    hits = [s for s in iso.susceptibilities if s.interpretation == want and s.known <= m.now]  # type: ignore[union-attr]
    names = [vocab.antibiotic_names(s.antibiotic) for s in hits]
    return T.Truth(
        kind="count",
        value=len(hits),
        refs=[s.ref for s in hits],
        code=f"urn:rounds:susceptibility|{want}",
        label=label("susceptible" if want == "S" else "resistant"),
        present=bool(hits),
        extra={
            "list_en": listing(names, "en"),
            "list_zh": listing(names, "zh"),
            "antibiotics": [s.antibiotic for s in hits],
        },
    )


def _constant(b: Binding, m: Moment) -> T.Truth:
    return T.Truth(kind="value_at", value=b.value, time=m.now, refs=[m.chart.patient], present=True)


SINGLE_KINDS: dict[str, Callable[[Binding, Moment], T.Truth]] = {  # one record element each
    "latest": _latest,
    "previous": _previous,
    "value_at": _value_at,
    "mean": _aggregate,
    "min": _aggregate,
    "max": _aggregate,
    "count": _aggregate,
    "trend": _aggregate,
    "exists": _exists,
    "decision": _decision,
    "egfr": _egfr,
    "age": _age,
    "demographics": _demographics,
    "anchor_med": _anchor_med,
    "administration": _administration,
    "class_duplicates": _class_duplicates,
    "allergy": _allergy,
    "isolate": _isolate,
    "susceptible": _susceptibility,
    "resistant": _susceptibility,
    "constant": _constant,
}

