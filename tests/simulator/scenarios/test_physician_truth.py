"""Truths a physician would sign, on small hand-made charts: times in the ward's local time, ranges from the
result's own Observation, trends a redrawn spurious value cannot decide, "before we gave that" from the MAR,
replacement not asked where it is contraindicated or on a protocol's tier edge, drugs counted once."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest

from services.simulator.scenarios import truth as T
from services.simulator.scenarios.binding_table import KINDS
from services.simulator.scenarios.bindings import Moment, rules
from services.simulator.scenarios.chart import Administration, Chart, Encounter, Lab, Med
from services.simulator.scenarios.clock import clock, local, next_morning
from services.simulator.scenarios.families import Binding
from services.simulator.scenarios.vocabulary import LABITEMS, drug_identity, lab_code

STAY = "Encounter/e1"
T0 = datetime(2150, 1, 10, 12, 0, tzinfo=UTC)  # 07:00 on the ward (-05:00)


def lab(key: str, minutes: int, value: float, low: float | None = None, high: float | None = None) -> Lab:
    when = T0 + timedelta(minutes=minutes)
    known = when + timedelta(minutes=30)
    ref = f"Observation/{key}-{minutes}"
    return Lab(ref, key, lab_code(key), value, "mEq/L", when, known, STAY, low, high)


def chart(labs: list[Lab], **more) -> Chart:
    c = Chart("Patient/p1", "100", "Ann Example", None, "female", **more)
    c.encounters = [Encounter(STAY, T0 - timedelta(days=3), None, "IMP")]
    for item in labs:
        c.labs.setdefault(item.key, []).append(item)
    for series in c.labs.values():
        series.sort(key=lambda x: (x.known, x.effective, x.ref))
    return c


def bind(m: Moment, *bindings: Binding) -> dict[str, T.Truth]:
    for b in bindings:
        m.values[b.name] = KINDS[b.kind](b, m)
    return m.values


# -- one clock: the ward's local time


def test_times_are_written_in_the_wards_local_offset_across_daylight_saving() -> None:
    winter, summer = datetime(2150, 1, 10, 12, 0, tzinfo=UTC), datetime(2150, 7, 10, 12, 0, tzinfo=UTC)
    assert local(winter).isoformat() == "2150-01-10T07:00:00-05:00"
    assert local(summer).isoformat() == "2150-07-10T08:00:00-04:00"
    assert clock(winter) == "2150-01-10 07:00"  # what the physician reads, not 12:00 UTC


def test_tomorrow_at_8_is_8_on_the_ward_even_across_a_dst_change() -> None:
    late_evening = datetime(2150, 1, 11, 3, 30, tzinfo=UTC)  # 22:30 on the 10th, local
    assert next_morning(late_evening).isoformat() == "2150-01-11T08:00:00-05:00"
    # the night the clocks go forward (second Sunday of March 2150 is the 8th): 8 am is already -04:00
    saturday_night = datetime(2150, 3, 8, 4, 0, tzinfo=UTC)  # 23:00 on Saturday the 7th
    assert next_morning(saturday_night).isoformat() == "2150-03-08T08:00:00-04:00"


def test_a_naive_time_is_refused() -> None:
    with pytest.raises(ValueError, match="naive"):
        local(datetime(2150, 1, 1, 8, 0))


def test_a_fact_states_its_time_and_window_in_local_time() -> None:
    c = chart([lab("potassium", 0, 4.0)])
    fact = T.aggregate("mean", c, "potassium", T0 + timedelta(hours=2), 24).fact()
    assert fact.window[0].utcoffset() == fact.window[1].utcoffset() == timedelta(hours=-5)


# -- the result's own range


def test_abnormal_is_judged_against_the_observations_own_reference_range() -> None:
    """K 3.4 is normal in a lab whose range is 3.3-5.1, though below the vocabulary's adult 3.5."""
    c = chart([lab("potassium", 0, 3.4, low=3.3, high=5.1)])
    m = Moment(c, T0 + timedelta(hours=1), "potassium")
    values = bind(m, Binding(name="cur", kind="latest"), Binding(name="abn", kind="range", input="cur"))
    assert values["abn"].value == "normal"
    extra = values["abn"].extra
    assert (extra["low"], extra["high"], extra["range_source"]) == (3.3, 5.1, "record")


def test_the_vocabularys_range_only_where_the_record_has_none() -> None:
    c = chart([lab("potassium", 0, 3.4)])
    m = Moment(c, T0 + timedelta(hours=1), "potassium")
    values = bind(m, Binding(name="cur", kind="latest"), Binding(name="abn", kind="range", input="cur"))
    assert (values["abn"].value, values["abn"].extra["range_source"]) == ("abnormal", "vocabulary")
    assert values["abn"].extra["side"] == "low"


# -- trends


def test_a_value_redrawn_within_the_hour_does_not_decide_the_trend() -> None:
    """K 5.9 (haemolysed) redrawn as 4.0 ten minutes later, then 4.2, 4.5, 4.8: the trend is up, not down."""
    series = [lab("potassium", 0, 5.9), lab("potassium", 10, 4.0), lab("potassium", 360, 4.2),
              lab("potassium", 720, 4.5), lab("potassium", 1080, 4.8)]
    c = chart(series)
    trend = T.aggregate("trend", c, "potassium", T0 + timedelta(hours=20), 72)
    assert (trend.value, trend.extra["first"], trend.extra["last"]) == ("up", 4.0, 4.8)
    assert trend.extra["superseded"] == 1
    assert len(trend.refs) == 5  # every result of the window is still a source


def test_a_whole_blood_redraw_that_contradicts_a_serum_value_takes_it_out_of_the_trend() -> None:
    """The demo's case: serum K 5.9 (haemolysed), a blood-gas whole-blood K of 4.0 ten minutes later, then
    serum 4.3, 4.6, 4.7: the trend is up (4.3 -> 4.7), not down from the spurious 5.9. A whole-blood value
    that agrees, or one drawn more than an hour later, takes nothing out."""
    serum = [lab("potassium", 0, 5.9), lab("potassium", 360, 4.3), lab("potassium", 720, 4.6),
             lab("potassium", 1080, 4.7)]
    c = chart(serum)
    c.repeats["potassium"] = [replace(lab("potassium", 10, 4.0), ref="Observation/wb-10",
                                      code=f"{LABITEMS}|50822")]
    trend = T.aggregate("trend", c, "potassium", T0 + timedelta(hours=20), 72)
    assert (trend.value, trend.extra["first"], trend.extra["last"]) == ("up", 4.3, 4.7)
    assert trend.extra["superseded"] == 1
    agreeing = chart(serum)
    agreeing.repeats["potassium"] = [replace(lab("potassium", 10, 5.8), ref="Observation/wb-10")]
    assert T.aggregate("trend", agreeing, "potassium", T0 + timedelta(hours=20), 72).value == "down"
    late = chart(serum)
    late.repeats["potassium"] = [replace(lab("potassium", 90, 4.0), ref="Observation/wb-90")]
    assert T.aggregate("trend", late, "potassium", T0 + timedelta(hours=20), 72).value == "down"
    unknown_yet = chart(serum)
    unknown_yet.repeats["potassium"] = [replace(lab("potassium", 10, 4.0), known=T0 + timedelta(days=2))]
    assert T.aggregate("trend", unknown_yet, "potassium", T0 + timedelta(hours=20), 72).value == "down"


def test_whole_blood_itemids_are_read_as_redraws_of_their_lab() -> None:
    from services.simulator.scenarios.vocabulary import lab_keys_by_itemid, repeat_keys_by_itemid

    assert repeat_keys_by_itemid()["50822"] == "potassium" and "50822" not in lab_keys_by_itemid()


def test_repeats_more_than_an_hour_apart_are_each_a_point_of_the_trend() -> None:
    c = chart([lab("potassium", 0, 5.9), lab("potassium", 90, 4.0)])
    trend = T.aggregate("trend", c, "potassium", T0 + timedelta(hours=3), 72)
    assert (trend.value, trend.extra["superseded"]) == ("down", 0)


# -- "before we gave that": the MAR


def _kcl(minutes: int, ref: str, dose: float = 20) -> Administration:
    return Administration(ref, "potassium_chloride", "Potassium Chloride", T0 + timedelta(minutes=minutes),
                          "MedicationRequest/o1", dose, "mEq", STAY)


def test_before_we_gave_that_is_the_value_before_the_last_dose_given() -> None:
    order = Med("MedicationRequest/o1", "potassium_chloride", "Potassium Chloride", "PO", 20, "mEq",
                T0 - timedelta(hours=1), T0 - timedelta(hours=1), None, STAY, "active")
    c = chart([lab("potassium", -120, 3.1), lab("potassium", 200, 3.4), lab("potassium", 400, 3.9)],
              meds=[order], administrations=[_kcl(0, "MedicationAdministration/a1"),
                                             _kcl(300, "MedicationAdministration/a2", 40)])
    m = Moment(c, T0 + timedelta(hours=12), "potassium", med=order)
    values = bind(m, Binding(name="med", kind="anchor_med"), Binding(name="after", kind="latest", of="med"),
                  Binding(name="given", kind="administration", of="after"),
                  Binding(name="before", kind="value_at", of="given"))
    assert values["after"].value == 3.9
    assert (values["given"].refs, values["given"].extra["dose"]) == (["MedicationAdministration/a2"], 40)
    assert values["before"].value == 3.4  # the value before the 40 mEq, not before the order


def test_no_dose_on_the_mar_means_no_treatment_response() -> None:
    order = Med("MedicationRequest/o1", "potassium_chloride", "Potassium Chloride", "PO", 20, "mEq",
                T0, T0, None, STAY, "active")
    c = chart([lab("potassium", -60, 3.1), lab("potassium", 300, 3.6)], meds=[order])
    m = Moment(c, T0 + timedelta(hours=12), "potassium", med=order)
    values = bind(m, Binding(name="med", kind="anchor_med"), Binding(name="after", kind="latest", of="med"),
                  Binding(name="given", kind="administration", of="after"))
    assert not values["given"].present


# -- replacement: contraindications and protocol edges


def _replacement(c: Chart) -> str:
    m = Moment(c, T0 + timedelta(hours=1), "potassium")
    values = bind(m, Binding(name="cur", kind="latest"),
                  Binding(name="dec", kind="decision", rule="potassium_replacement", input="cur"),
                  Binding(name="contra", kind="contraindication", input="cur", of="dec",
                          rule="replacement_contraindication"))
    return values["contra"].value


def test_no_replacement_for_a_value_the_chart_calls_normal() -> None:
    assert _replacement(chart([lab("potassium", 0, 3.4, low=3.3, high=5.1)])) == "within_range"
    assert _replacement(chart([lab("potassium", 0, 3.2, low=3.3, high=5.1)])) == "none"


def test_no_replacement_for_a_patient_on_dialysis() -> None:
    c = chart([lab("potassium", 0, 3.0, low=3.3, high=5.1)], diagnoses=[("Z992", STAY)])
    assert _replacement(c) == "dialysis"
    later_stay = chart([lab("potassium", 0, 3.0, low=3.3, high=5.1)], diagnoses=[("Z992", "Encounter/later")])
    assert _replacement(later_stay) == "none"  # a stay not begun by `now` says nothing yet


def test_a_value_on_a_tier_edge_is_marked_so_the_builder_does_not_ask_it() -> None:
    rule = rules()["magnesium_replacement"]
    assert T.tiers(rule, 1.5)["_boundary"] and T.tiers(rule, 1.5)["dose"] == 1
    assert not T.tiers(rule, 1.4)["_boundary"]


# -- counting drugs


def test_drugs_are_counted_once_and_nameless_orders_not_at_all() -> None:
    assert drug_identity("") is None and drug_identity("  UNK ") is None
    assert drug_identity("Potassium Chloride") == drug_identity("Potassium Chloride Replacement (Oral)")
    assert drug_identity("Sodium Chloride 0.9%  Flush") == drug_identity("sodium chloride 0.9% flush")


def test_a_range_with_one_bound_is_printed_as_the_report_prints_it() -> None:
    shown = (T.range_text(3.3, 5.1), T.range_text(None, 0.01), T.range_text(60, None))
    assert shown == ("3.3-5.1", "<=0.01", ">=60")


def test_the_session_reports_now_as_the_scenario_writes_it() -> None:
    """The session's started event carries the scenario's `now` with the ward's offset, not UTC."""
    from events.payloads.session import SessionStarted

    now = local(T0)
    started = SessionStarted(assistant="oracle", as_of=now).model_dump(mode="json", exclude_none=True)
    assert started["as_of"] == "2150-01-10T07:00:00-05:00"
