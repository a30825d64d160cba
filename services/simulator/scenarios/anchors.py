"""The anchor kinds a family definition can name (`anchor.type`), in one table: each proposes the moments of a
chart where a definition's clock may stop (cheap; bindings come later). Every kind is listed here explicitly;
tests/simulator/scenarios/test_kind_tables.py keeps the table and the file format (families.py) in step."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta

from services.simulator.scenarios import vocabulary as vocab
from services.simulator.scenarios.bindings import Moment
from services.simulator.scenarios.chart import Chart
from services.simulator.scenarios.families import Anchor, Definition

At = Callable[[int, datetime], datetime]  # the i-th candidate's clock: its time plus the anchor's offset


def _lab(a: Anchor, chart: Chart, at: At, first_lab: str | None, ctx: dict) -> list[Moment]:
    """Each result of the anchor's labs (in a stay, with `in_encounter`)."""
    return [
        Moment(chart, at(i, lab.known), key, encounter=lab.encounter, anchor_value=lab.value, context=ctx)
        for key in a.labs
        for i, lab in enumerate(chart.labs.get(key, ()))
        if not a.in_encounter or lab.encounter
    ]


def _patient(a: Anchor, chart: Chart, at: At, first_lab: str | None, ctx: dict) -> list[Moment]:
    """One moment: just after the patient's last result of the first anchor lab."""
    series = [x for x in chart.labs.get(first_lab or "", ()) if not a.in_encounter or x.encounter]
    if not series:
        return []
    last = series[-1]
    return [Moment(chart, at(sum(map(ord, chart.patient)), last.known), first_lab, encounter=last.encounter,
                   anchor_value=last.value, context=ctx)]


def _med(a: Anchor, chart: Chart, at: At, first_lab: str | None, ctx: dict) -> list[Moment]:
    """Each order of the anchor's drugs or drug classes (running at the clock, with `require_active`)."""
    out = []
    for i, med in enumerate(chart.meds):
        if not med.key or med.start is None or (a.in_encounter and not med.encounter):
            continue
        if med.key not in a.drugs and vocab.drug(med.key)["class"] not in a.drug_classes:
            continue
        now = at(i, max(med.start, med.authored))
        if med.active_at(now) or not a.require_active:
            out.append(Moment(chart, now, first_lab, med=med, encounter=med.encounter, context=ctx))
    return out


def _isolate(a: Anchor, chart: Chart, at: At, first_lab: str | None, ctx: dict) -> list[Moment]:
    """Each isolate with susceptibilities, when it became known."""
    return [Moment(chart, at(i, iso.known), first_lab, isolate=iso, encounter=iso.encounter, context=ctx)
            for i, iso in enumerate(chart.isolates) if iso.susceptibilities]


def _discharge(a: Anchor, chart: Chart, at: At, first_lab: str | None, ctx: dict) -> list[Moment]:
    """Each stay's end, for stays of at least `min_stay_hours`."""
    return [Moment(chart, at(i, enc.end), first_lab, encounter=enc.ref, context=ctx)
            for i, enc in enumerate(chart.encounters)
            if enc.end and (enc.end - enc.start) >= timedelta(hours=a.min_stay_hours)]


ANCHORS: dict[str, Callable[[Anchor, Chart, At, str | None, dict], list[Moment]]] = {
    "lab": _lab,
    "patient": _patient,
    "med": _med,
    "isolate": _isolate,
    "discharge": _discharge,
}


def moments(defn: Definition, chart: Chart) -> list[Moment]:
    """Every moment of this chart the definition's anchor qualifies."""
    a = defn.anchor
    offsets = a.offset_minutes if isinstance(a.offset_minutes, list) else [a.offset_minutes]

    def at(i: int, when: datetime) -> datetime:
        return when + timedelta(minutes=offsets[i % len(offsets)])

    return ANCHORS[a.type](a, chart, at, a.labs[0] if a.labs else None, defn.context)
