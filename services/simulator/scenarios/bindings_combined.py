"""Binding kinds that combine several record elements: a lab's change across a treatment, a value against its
reference range, the active orders (all, or antibiotics against an isolate's susceptibilities), a stated
vital sign, the specialty a referral goes to (`COMBINED_KINDS`; binding_table.py joins them to the others)."""

from __future__ import annotations

import hashlib
from collections.abc import Callable

from contracts.vocabulary import label, listing, phrase
from services.simulator.scenarios import truth as T
from services.simulator.scenarios import vocabulary as vocab
from services.simulator.scenarios.bindings import Moment, _active, _lab_of, rules
from services.simulator.scenarios.families import Binding
from services.simulator.scenarios.vocabulary import drug_identity


def _change(b: Binding, m: Moment) -> T.Truth:
    """Direction from the `of` value to the `input` value (the lab's trend_delta decides)."""
    before, after = m.values[b.of or ""], m.values[b.input or ""]
    key = _lab_of(b, m)
    if not (before.present and after.present):
        return T.Truth(kind="trend", value=None, present=False, code=vocab.lab_code(key))
    delta = float(after.value) - float(before.value)
    step = vocab.lab(key)["trend_delta"]
    value = "up" if delta >= step else "down" if delta <= -step else "unchanged"
    return T.Truth(
        kind="trend",
        value=value,
        unit=after.unit,
        refs=[*before.refs, *after.refs],
        code=after.code,
        label=after.label,
        window=(before.time, after.time) if before.time and after.time else None,
        extra={"first": before.value, "last": after.value},
    )


def _range(b: Binding, m: Moment) -> T.Truth:
    """`input` against its own Observation's referenceRange (the lab's normal range for that patient, as the
    chart flags it); the vocabulary's adult range only where the record gives none. `range_source` says which
    decided ("record" | "vocabulary")."""
    source = m.values[b.input or ""]
    if not source.present:
        return T.Truth(kind="decision", value=None, present=False)
    low, high, origin = T.normal_range(source.extra.get("_lab"), _lab_of(b, m))
    value = float(source.value)
    side = "normal"
    if high is not None and value > high:
        side = "high"
    elif low is not None and value < low:
        side = "low"
    return T.Truth(
        kind="decision",
        value="normal" if side == "normal" else "abnormal",
        refs=list(source.refs),
        code="urn:rounds:rule|reference_range",
        label=label("reference_range"),
        extra={
            "low": low,
            "high": high,
            "range_source": origin,
            "range_text": T.range_text(low, high),
            "side": side,
            "side_zh": label(side)["zh"],
        },
    )


def _active_meds(b: Binding, m: Moment) -> T.Truth:
    """The drugs with an order running at `now`, from the whole record (one per drug; drugs outside the
    builder's vocabulary by their record name), or only the vocabulary drugs of the classes in `value`."""
    classes = set(b.value or ())
    if classes:
        running = [x for x in _active(m) if vocab.drug(x.key)["class"] in classes]
    else:
        running = [x for x in m.chart.meds if x.active_at(m.now)]
    meds = {drug: x for x in running if (drug := drug_identity(x.name)) is not None}
    names = [vocab.drug(x.key) if x.key else {"en": x.name, "zh": x.name} for _, x in sorted(meds.items())]
    return T.Truth(
        kind="count",
        value=len(meds),
        refs=sorted(x.ref for x in meds.values()),
        code="urn:rounds:active-orders",
        label=label("active_medications"),
        present=bool(meds),
        extra={
            "list_en": listing(names, "en"),
            "list_zh": listing(names, "zh"),
        },
    )


def _coverage(b: Binding, m: Moment) -> T.Truth:
    """Does an antibiotic running at `now` cover the isolate? covered: one tested susceptible; not_covered:
    every tested one resistant/intermediate; untested: none of them was tested (or none runs)."""
    iso = m.isolate
    tested = {s.antibiotic.upper(): s for s in iso.susceptibilities if s.known <= m.now}  # type: ignore[union-attr]
    running = [x for x in _active(m) if vocab.drug(x.key).get("susc") in tested]
    hits = [(x, tested[vocab.drug(x.key)["susc"]]) for x in running]
    covered = [x for x, s in hits if s.interpretation == "S"]
    outcome = "covered" if covered else "not_covered" if hits else "untested"
    pick = (covered or [x for x, _ in hits] or [None])[0]
    drug = vocab.drug(pick.key) if pick else label("none")
    return T.Truth(
        kind="decision",
        value=outcome,
        refs=[*(x.ref for x, _ in hits), *(s.ref for _, s in hits)],
        code="urn:rounds:rule|antibiotic_coverage",
        label=label("antibiotic_coverage"),
        extra={"drug_en": drug["en"], "drug_zh": drug["zh"]},
    )


def _vital_bp(b: Binding, m: Moment) -> T.Truth:
    """A blood pressure the physician states (the record has no value to read; it is the task's input)."""
    digest = hashlib.sha256(f"{m.chart.patient}|{m.now.isoformat()}".encode()).digest()
    systolic, diastolic = 100 + digest[0] % 61, 60 + digest[1] % 36
    bp = f"{systolic}/{diastolic}"
    return T.Truth(
        kind="value_at",
        value=f"{bp} mmHg",
        time=m.now,
        refs=[m.chart.patient],
        code="http://loinc.org|85354-9",
        label=label("blood_pressure"),
        extra={"bp": bp, "text": f"{bp} mmHg"},
    )


def _referral(b: Binding, m: Moment) -> T.Truth:
    """The specialty for the first of `value`'s conditions (vocabulary keys) diagnosed by `now`."""
    services = m.context["services"]
    known = {c.key: c for c in m.chart.conditions if c.known is not None and c.known <= m.now}
    key = next((k for k in b.value or () if k in known), None)
    if key is None:
        return T.Truth(kind="exists", value=False, present=False)
    cond, service = vocab.condition(key), services[key]
    sbar = phrase("referral_sbar")["en"].format(service=service["en"], condition=cond["en"])
    return T.Truth(
        kind="exists",
        value=True,
        refs=[known[key].ref],
        code=f"urn:rounds:referral|{service['en']}",
        label={"en": cond["en"], "zh": cond["zh"]},
        extra={
            "service": service["en"],
            "service_zh": service["zh"],
            "sbar": sbar,
            "condition_en": cond["en"],
            "condition_zh": cond["zh"],
        },
    )


def _contraindication(b: Binding, m: Moment) -> T.Truth:
    """Why a replacement must not be asked for (data/rules.json `replacement_contraindication`): "dialysis",
    "within_range" (the decision `of` orders a replacement for an `input` its own Observation calls normal),
    or "none". Diagnoses of every stay begun by `now` count: the builder excludes, it asserts nothing."""
    rule = rules()[b.rule or "replacement_contraindication"]
    begun = {e.ref for e in m.chart.encounters if e.start <= m.now}
    codes = tuple(rule["dialysis_icd"])
    dialysis = [c for c, enc in m.chart.diagnoses if enc in begun and c.startswith(codes)]
    source, decision = m.values[b.input or ""], m.values[b.of or ""]
    lab = source.extra.get("_lab")
    inside = (
        decision.value == "order" and lab is not None and lab.low is not None and source.value >= lab.low
    )
    value = "dialysis" if dialysis else "within_range" if inside else "none"
    return T.Truth(kind="decision", value=value, refs=list(source.refs), extra={"_codes": dialysis})


COMBINED_KINDS: dict[str, Callable[[Binding, Moment], T.Truth]] = {
    "change": _change,
    "range": _range,
    "active_meds": _active_meds,
    "coverage": _coverage,
    "vital_bp": _vital_bp,
    "referral": _referral,
    "contraindication": _contraindication,
}
