"""Truth as of the session clock: what a chart says at `now`, by kind (latest, value_at, mean, min, max,
count,
trend, exists, absent, decision). Pure functions over a Chart; nothing after `now` is ever looked at.

Definitions every checker (the CSV recomputation test included) shares:
- a lab result is *known* at `now` when its known time (store/known_time.json: storetime, the Observation's
  `issued`) is <= `now`: exactly when the sandbox shows it;
- a window of H hours holds the known results whose effective (chart) time is in [now - H, now];
- `latest` is the known result with the latest chart (effective) time, what the sandbox's newest-first search
  (`_sort=-date`) puts first (ties: the later known time): one drawn earlier but reported later is not it;
- `trend` compares the first and last result of the window once each result redrawn within an hour is
  replaced by its repeat (`settled`): a change of at least the lab's trend_delta is up/down, less unchanged.
"""

from __future__ import annotations

import math
from bisect import bisect_right
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from contracts.scenario import Fact
from contracts.vocabulary import label
from services.simulator.scenarios import vocabulary as vocab
from services.simulator.scenarios.chart import Chart, Lab
from services.simulator.scenarios.clock import local

EGFR_CODE = "urn:rounds:derived|egfr-ckd-epi-2021"


@dataclass
class Truth:
    """One computed element of truth, before it becomes a Fact (bindings hold these)."""

    kind: str
    value: Any = None
    unit: str | None = None
    time: datetime | None = None
    refs: list[str] = field(default_factory=list)
    code: str | None = None
    label: dict[str, str] | None = None
    window: tuple[datetime, datetime] | None = None
    tolerance: float | None = None
    extra: dict[str, Any] = field(default_factory=dict)
    present: bool = True

    def fact(self) -> Fact:
        single = len(self.refs) == 1 and self.kind not in ("mean", "min", "max", "count", "trend")
        return Fact(
            kind=self.kind,
            code=self.code,
            label=self.label,
            value=self.value,
            unit=self.unit,
            tolerance=self.tolerance,
            time=local(self.time) if self.time else None,
            window=(local(self.window[0]), local(self.window[1])) if self.window else None,
            reference=self.refs[0] if single else None,
            references=[] if single else list(self.refs),
            **{k: v for k, v in self.extra.items() if not k.startswith("_") and k not in Fact.model_fields},
        )


def chart_order(lab: Lab) -> tuple:
    """How results of one lab are ordered in time: by chart time, as the record's `date` sorts them."""
    return (lab.effective, lab.known, lab.ref)


def known(chart: Chart, key: str, now: datetime) -> list[Lab]:
    """The results of one lab known at `now`, in known-time order."""
    series = chart.labs.get(key, [])
    times = [lab.known for lab in series]
    return series[: bisect_right(times, now)]


def window(chart: Chart, key: str, now: datetime, hours: float) -> list[Lab]:
    start = now - timedelta(hours=hours)
    return sorted(
        (lab for lab in known(chart, key, now) if lab.effective >= start),
        key=lambda lab: (lab.effective, lab.known, lab.ref),
    )


def latest(chart: Chart, key: str, now: datetime, hours: float | None = None) -> Lab | None:
    series = known(chart, key, now)
    if hours is not None:
        start = now - timedelta(hours=hours)
        series = [lab for lab in series if lab.effective >= start]
    if not series:
        return None
    return max(series, key=chart_order)


def normal_range(lab: Lab | None, key: str) -> tuple[float | None, float | None, str]:
    """The normal range a result is judged against: its own Observation's referenceRange when the record gives
    one (MIMIC's per-lab, per-patient ref_range_lower/upper), else the vocabulary's adult range; and which."""
    if lab is not None and (lab.low is not None or lab.high is not None):
        return lab.low, lab.high, "record"
    entry = vocab.lab(key)
    return entry["low"], entry["high"], "vocabulary"


def range_text(low: float | None, high: float | None) -> str:
    """A normal range as the report prints it: "3.3-5.1", or one bound ("<=0.01", ">=60") when it has one."""
    shown = [f"{bound:g}" if bound is not None else None for bound in (low, high)]
    if shown[0] and shown[1]:
        return f"{shown[0]}-{shown[1]}"
    return f"<={shown[1]}" if shown[1] else f">={shown[0]}" if shown[0] else ""


def rounded(key: str, value: float) -> float:
    return round(value, vocab.lab(key)["decimals"])


def _label(key: str) -> dict[str, str]:
    entry = vocab.lab(key)
    return {"en": entry["en"], "zh": entry["zh"]}


def lab_truth(kind: str, lab: Lab | None, key: str, window: tuple[datetime, datetime] | None = None) -> Truth:
    """A single result as truth (`absent` when there is none); `window` when the question bounded it."""
    if lab is None:
        return Truth(
            kind="absent",
            value=True,
            code=vocab.lab_code(key),
            label=_label(key),
            window=window,
            present=False,
        )
    return Truth(
        kind=kind,
        value=lab.value,
        unit=lab.unit,
        time=lab.effective,
        refs=[lab.ref],
        code=lab.code,
        label=_label(key),
        window=window,
        extra={"_lab": lab},
    )


def aggregate(kind: str, chart: Chart, key: str, now: datetime, hours: float) -> Truth:
    labs = window(chart, key, now, hours)
    bounds = (now - timedelta(hours=hours), now)
    base = Truth(
        kind=kind, code=vocab.lab_code(key), label=_label(key), window=bounds, refs=[x.ref for x in labs]
    )
    if kind == "count":
        base.value, base.present = len(labs), bool(labs)
        return base
    if not labs:
        return Truth(
            kind="absent", value=True, code=base.code, label=base.label, window=bounds, present=False
        )
    base.unit = labs[-1].unit
    values = [lab.value for lab in labs]
    half = 0.5 * 10 ** -vocab.lab(key)["decimals"]
    if kind == "mean":
        base.value, base.tolerance = round(sum(values) / len(values), 2), half
    elif kind in ("min", "max"):
        pick = (min if kind == "min" else max)(labs, key=lambda lab: (lab.value, lab.effective, lab.ref))
        base.value, base.time, base.extra["at"] = pick.value, pick.effective, pick.ref
        base.extra["_lab"] = pick
    elif kind == "trend":
        start = now - timedelta(hours=hours)
        redrawn = [r for r in chart.repeats.get(key, []) if r.known <= now and r.effective >= start]
        kept = settled(labs, redrawn, vocab.lab(key)["trend_delta"])
        if len(kept) < 2:
            base.present = False
        delta = kept[-1].value - kept[0].value
        step = vocab.lab(key)["trend_delta"]
        base.value = "up" if delta >= step else "down" if delta <= -step else "unchanged"
        base.extra.update(first=kept[0].value, last=kept[-1].value, _first=kept[0], _last=kept[-1])
        base.extra["superseded"] = len(labs) - len(kept)  # results replaced by a repeat within the hour
    return base


REPEAT = timedelta(hours=1)


def settled(labs: list[Lab], redrawn: list[Lab] = (), contradicts: float = float("inf")) -> list[Lab]:
    """The results a trend is read from (chart order): a result followed by a repeat of the same lab drawn
    within an hour is replaced by that repeat, and one a redraw by another method (`redrawn`: a whole-blood
    value on a blood gas) contradicts within the hour by at least `contradicts` is dropped, so a spurious
    value (a haemolysed serum K of 5.9, a whole-blood K of 4.0 ten minutes later) cannot decide the
    direction; agreeing repeats change nothing but the count."""

    def contradicted(lab: Lab) -> bool:
        return any(timedelta(0) < r.effective - lab.effective <= REPEAT
                   and abs(r.value - lab.value) >= contradicts for r in redrawn)

    return [lab for lab, nxt in zip(labs, [*labs[1:], None], strict=True)
            if (nxt is None or nxt.effective - lab.effective > REPEAT) and not contradicted(lab)]


def egfr(creatinine: float, age: int, female: bool) -> float:
    """CKD-EPI 2021 (race-free), mL/min/1.73 m2."""
    kappa, alpha = (0.7, -0.241) if female else (0.9, -0.302)
    ratio = creatinine / kappa
    value = 142 * min(ratio, 1) ** alpha * max(ratio, 1) ** -1.200 * 0.9938**age
    return value * (1.012 if female else 1.0)


def egfr_truth(chart: Chart, cr: Truth, now: datetime) -> Truth:
    age = chart.age_at(now)
    if not cr.present or age is None or chart.gender not in ("male", "female"):
        return Truth(
            kind="absent",
            value=True,
            code=EGFR_CODE,
            label=label("egfr"),
            present=False,
        )
    value = egfr(float(cr.value), age, chart.gender == "female")
    return Truth(
        kind="latest",
        value=round(value),
        unit="mL/min/1.73m2",
        time=cr.time,
        refs=[*cr.refs, chart.patient],
        code=EGFR_CODE,
        label=label("egfr"),
        tolerance=3.0,
        extra={"formula": "CKD-EPI 2021", "age": age},
    )


def tiers(rule: dict, value: float | None) -> dict[str, Any]:
    if value is None:
        return {"outcome": rule["missing"]}
    edges = [tier["below"] for tier in rule["tiers"] if tier["below"] is not None]
    for tier in rule["tiers"]:
        if tier["below"] is None or value < tier["below"]:
            # on an edge between two tiers a clinician may read either: the builder does not ask it
            return {**tier, "_boundary": any(math.isclose(value, edge) for edge in edges)}
    raise ValueError("tiers must end with an open tier")


def linear(rule: dict, value: float | None) -> dict[str, Any]:
    if value is None:
        return {"outcome": rule["missing"]}
    if value >= rule["threshold"]:
        return {"outcome": rule["outcome_else"]}
    steps = math.floor((rule["threshold"] - value) / rule["step"] + 1e-9)
    return {"outcome": rule["outcome_below"], "dose": steps * rule["per_step"], "unit": rule["unit"]}


def age_rule(rule: dict, time: datetime | None, now: datetime) -> dict[str, Any]:
    if time is None:
        return {"outcome": rule["missing"]}
    days = (now - time).total_seconds() / 86400
    return {
        "outcome": rule["outcome_old"] if days > rule["max_days"] else rule["outcome_recent"],
        "age_days": int(days),
    }
