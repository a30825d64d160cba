"""Scorer version 4 on in-memory sessions of the world scenario (tests/consumers/scoring/v3/v3_world.py):
each rule of
issue 36 with the honest answer it must accept and the trick it must not pay; versions 2 and 3 still score
the same log by their own rules."""

from __future__ import annotations

from datetime import timedelta

import orjson
import pytest

from contracts.scenario import ExpectedWrite, Fact
from contracts.trajectory import EhrCall
from services.consumers.scoring.check_inputs import Written
from services.consumers.scoring.scorer import SCORER_VERSION, score_session
from services.consumers.scoring.v3.subjects import subject_names
from services.consumers.scoring.v4.claims import read_answer
from services.consumers.scoring.v4.facts import count_fact
from services.consumers.scoring.v4.scope import in_scope
from services.consumers.scoring.v4.writes import companion_refs, failures
from services.consumers.scoring.versions import rules_of
from tests.consumers.scoring.v3.v3_world import LAB, SCENARIO, apixaban, log

CR, GLU, WBC, K = f"{LAB}|50912", f"{LAB}|50931", f"{LAB}|51301", f"{LAB}|50971"
NAMES = subject_names(SCENARIO)


def score(answers=None, version=None, **kw):
    session, state = log(answers, writes={3: [apixaban()]}, **kw)
    return score_session(session, SCENARIO, state, version=version)


def check(result, index, check_id):
    return next(c for c in result.turns[index].checks if c.id == check_id)


def claims(text):
    return [(c.subject, c.value, c.base.unit, c.kind, c.qualifier) for c in read_answer(text, NAMES).claims]


def test_version_4_is_the_default_and_older_labels_keep_their_rules() -> None:
    assert SCORER_VERSION == "4"
    assert [rules_of(v) for v in ("2", "2-x", "3", "3.1", "4", None)] == ["2", "2", "3", "3", "4", "4"]
    for language in ("en", "zh"):
        assert score(language=language).score == 1.0
    answer = {0: "Cr 1.8, Glu 126."}  # v3 does not know the abbreviations: the versions differ on this log
    assert score(answer, version="3").score < score(answer).score == 1.0


@pytest.mark.parametrize("text, expected", [
    ("WBC 13.5 ×10⁹/L", [(WBC, 13.5, "K/uL", "result", None)]),
    ("WBC 13.5 x10^9/L", [(WBC, 13.5, "K/uL", "result", None)]),
    ("white count 13.5 K/µL", [(WBC, 13.5, "K/uL", "result", None)]),
    ("K 3.4, Cr 1.8 mg/dL", [(K, 3.4, None, "result", None), (CR, 1.8, "mg/dL", "result", None)]),
    ("钾：3.4", [(K, 3.4, None, "result", None)]),
    ("1. Cr 1.8 on 2/28 at 17:42", [(CR, 1.8, None, "result", "at")]),
    ("肌酐1.8（2月28日下午5点42分）", [(CR, 1.8, None, "result", "at")]),
    ("Creatinine rose from 1.1 to 1.8, up 0.7 over 48 hours; BUN/Cr ratio 20",
     [(CR, 1.1, None, "result", "previous"), (CR, 1.8, None, "result", "latest"),
      (CR, 0.7, None, "delta", None), (CR, 48.0, None, "duration", None), (CR, 20.0, None, "ratio", None)]),
    ("MRN 10000032, Observation/ab12-cd34-ef56", []),
    ("MIC 0.25 for vancomycin", [(None, 0.25, None, "mic", None)]),
])
def test_clinical_prose_is_read_as_a_clinician_writes_it(text, expected) -> None:
    assert claims(text) == expected


@pytest.mark.parametrize("answer", [
    "Her latest creatinine is 159 µmol/L; glucose 7.0 mmol/L.",  # ×88.4 against 88.42, mmol/L
    "Latest Cr 1.8 (2/28); Glu 126 mg/dL.",  # abbreviations, a date beside the value
    "1. Creatinine: 1.8 mg/dL (most recent)\n2. Glucose: 126 mg/dL",  # list markers
    "Creatinine went from 1.1 to 1.8 mg/dL (up 0.7); glucose 126.",  # a delta is no wrong value
])
def test_honest_rephrasings_keep_full_marks(answer) -> None:
    result = score({0: answer})
    assert result.turns[0].score == 1.0, [(c.id, c.evidence) for c in result.turns[0].checks if not c.passed]


def test_a_list_without_saying_which_is_latest_does_not_answer_latest() -> None:
    result = score({0: "Creatinine values: 1.8, 1.1. Glucose 126."})
    assert not check(result, 0, "t0-cr").passed
    assert "without saying which" in check(result, 0, "t0-cr").evidence


@pytest.mark.parametrize("answer, why", [
    ("Latest creatinine 1.84 mg/dL; glucose 126.", "no true claim"),  # one decimal finer: invented
    ("Latest creatinine 1.8 mmol/L; glucose 126.", "no true claim"),  # a unit that does not convert
    ("Latest creatinine 1.8 mgs; glucose 126.", "no true claim"),  # an unknown unit
])
def test_wrong_claims_fail_the_fact(answer, why) -> None:
    evidence = check(score({0: answer}), 0, "t0-cr")
    assert not evidence.passed and why in evidence.evidence


def test_invented_and_wrong_extras_cost_true_extras_are_free() -> None:
    right = "Latest creatinine 1.8 mg/dL; glucose 126 mg/dL."
    assert score({0: right + " Earlier creatinine 1.1 mg/dL."}).turns[0].score == 1.0  # a true extra
    invented = score({0: right + " Earlier creatinine 1.15 mg/dL, potassium 4.13."})
    prec = check(invented, 0, "precision")
    assert invented.turns[0].score == 0.0 and [w["verdict"] for w in prec.precision["wrong"]] == [
        "wrong", "unsupported"]
    assert prec.precision["verbosity"]["claims"] == 4


def test_padding_alone_never_halves_a_right_turn_below_half() -> None:
    right = "Latest creatinine 1.8 mg/dL; glucose 126 mg/dL. "
    padded = right + " ".join(f"Creatinine 1.1 mg/dL on 1/{d}." for d in range(1, 29))
    turn = score({0: padded}).turns[0]
    assert 0.5 <= turn.score < 1.0


def test_a_future_value_leaks_only_when_nothing_known_says_it() -> None:
    assert not check(score({0: "Latest creatinine 1.8; glucose 126. It will be 2.6 next draw."}), 0,
                     "t0-future").passed
    converted = score({0: "Latest creatinine 1.8 mg/dL; glucose 7.0 mmol/L."})
    assert check(converted, 0, "t0-future").passed and converted.turns[0].score == 1.0


def test_grounding_needs_the_value_not_the_id() -> None:
    session, state = log({}, writes={3: [apixaban()]})
    ids_only = '{"resourceType":"Bundle","entry":[{"resource":{"resourceType":"Observation","id":"cr1"}}]}'
    with_values = ids_only.replace('"id":"cr1"}', '"id":"cr1","valueQuantity":{"value":1.8}}')
    for body, passes in ((ids_only, False), (with_values, True)):
        t0 = session.turns[0]
        call = t0.ehr[0]
        t0.ehr[0] = EhrCall(call.method, call.url, call.position, call.status, call.latency_ms, call.query,
                            call.resources, body)
        evidence = check(score_session(session, SCENARIO, state), 0, "t0-cr")
        assert evidence.passed is passes, evidence.evidence


def test_offers_and_other_orders_are_no_verdicts() -> None:
    from services.consumers.scoring.text import normalize
    from services.consumers.scoring.v3.cues import conclusion_claims
    from services.consumers.scoring.v3.names import Named, clauses

    for text in ("If you want I can order a repeat, no problem.", "I haven't placed any new orders.",
                 "其他医嘱保持不变，不需要调整。"):
        norm = normalize(text)
        found = conclusion_claims(norm, "", clauses(norm), Named(norm, NAMES))
        assert found and not in_scope(found, norm), text
    norm = normalize("No, it is not needed.")
    assert in_scope(conclusion_claims(norm, "", clauses(norm), Named(norm, NAMES)), norm)


def test_counts_a_spray_fails_a_list_counts() -> None:
    fact = Fact.model_validate({"kind": "count", "code": K, "value": 3,
                                "label": {"en": "potassium", "zh": "血钾"},
                                "list_en": "aspirin, heparin, insulin", "list_zh": "阿司匹林、肝素、胰岛素"})

    def run(text):
        r = read_answer(text, NAMES)
        return count_fact(fact, r.claims, r.norm, ["potassium"])[0]

    assert run("There are 3 potassium results.")
    assert not run("0 1 2 3 4 5 6 results")
    assert run("Active: aspirin, heparin and insulin.")
    assert not run("Active: aspirin and heparin.")


def _lab_order(*codings, route=None) -> Written:
    resource = {"resourceType": "ServiceRequest", "status": "active", "intent": "order",
                "subject": {"reference": "Patient/p1"}, "code": {"coding": [
                    {"system": s, "code": c} for s, c in codings]}}
    return Written("ServiceRequest", "sr1", 1, False, "POST", resource)


def test_writes_by_intent() -> None:
    creat = ExpectedWrite.model_validate({
        "resource_type": "ServiceRequest", "resource": {"resourceType": "ServiceRequest"},
        "constraints": [{"path": "status", "op": "equals", "value": "active"},
                        {"path": "code.coding", "op": "coding", "value": "http://loinc.org|2160-0"}]})
    now = SCENARIO.now
    with_bun = _lab_order(("http://loinc.org", "2160-0"), ("http://loinc.org", "3094-0"))
    assert not failures(with_bun, creat, now)
    assert not failures(_lab_order((LAB, "50912")), creat, now)  # the MIMIC itemid of creatinine
    assert failures(_lab_order(("http://loinc.org", "2160-0"), ("http://loinc.org", "2823-3")), creat, now)
    note = ExpectedWrite.model_validate({
        "resource_type": "Communication", "resource": {"resourceType": "Communication"},
        "constraints": [{"path": "subject", "op": "reference", "value": "Patient/p1"},
                        {"path": "about", "op": "reference", "value": "Observation/o1"}]})
    consult = _lab_order()
    consult.resource["code"] = {"text": "Infectious disease consult"}
    assert not failures(consult, note, now)
    consult.resource["code"] = {"text": "Cardiology consult"}
    assert failures(consult, note, now)
    request = Written("CommunicationRequest", "c1", 1, False, "POST", {
        "resourceType": "CommunicationRequest", "status": "active", "subject": {"reference": "Patient/p1"}})
    assert not failures(request, note, now)  # a message to the team, asked as a request
    oral = ExpectedWrite.model_validate({
        "resource_type": "MedicationRequest", "resource": {"resourceType": "MedicationRequest"},
        "constraints": [{"path": "dosageInstruction.route.text", "op": "contains", "value": "oral"}]})
    coded = Written("MedicationRequest", "m", 1, False, "POST", {"resourceType": "MedicationRequest",
                    "dosageInstruction": [{"route": {"coding": [{"system": "http://snomed.info/sct",
                                                                 "code": "26643006"}]}}]})
    assert not failures(coded, oral, now)
    turn = SCENARIO.turns[3].model_copy(update={"writes": [creat]})
    bun = _lab_order(("http://loinc.org", "3094-0"))
    assert companion_refs(turn, [bun]) == {"ServiceRequest/sr1"}


def test_a_route_written_as_an_abbreviation_beside_its_code_reads_as_the_route() -> None:
    oral = ExpectedWrite.model_validate({
        "resource_type": "MedicationRequest", "resource": {"resourceType": "MedicationRequest"},
        "constraints": [{"path": "dosageInstruction.route.text", "op": "contains", "value": "oral"}]})

    def written(code: str, display: str, text: str) -> Written:
        return Written("MedicationRequest", "m", 1, False, "POST", {"resourceType": "MedicationRequest",
                       "dosageInstruction": [{"route": {"coding": [{"system": "http://snomed.info/sct",
                                                                    "code": code, "display": display}],
                                                        "text": text}}]})

    assert not failures(written("26643006", "Oral route", "PO"), oral, SCENARIO.now)
    assert failures(written("47625008", "Intravenous route", "IV"), oral, SCENARIO.now)


def test_an_untimed_order_meets_a_window_from_now_and_a_wrong_time_still_fails() -> None:
    a1c = ExpectedWrite.model_validate({
        "resource_type": "ServiceRequest", "resource": {"resourceType": "ServiceRequest"},
        "constraints": [{"path": "status", "op": "equals", "value": "active"},
                        {"path": "occurrenceDateTime", "op": "after_now", "value": "PT32H"}]})
    untimed = _lab_order(("http://loinc.org", "4548-4"))
    assert not failures(untimed, a1c, SCENARIO.now)
    back_dated = _lab_order(("http://loinc.org", "4548-4"))
    back_dated.resource["occurrenceDateTime"] = (SCENARIO.now - timedelta(days=2)).isoformat()
    assert failures(back_dated, a1c, SCENARIO.now)
    late = _lab_order(("http://loinc.org", "4548-4"))
    late.resource["occurrenceDateTime"] = (SCENARIO.now + timedelta(days=5)).isoformat()
    assert failures(late, a1c, SCENARIO.now)
    untimed.resource["status"] = "draft"
    assert failures(untimed, a1c, SCENARIO.now)


def test_blood_pressure_as_components_meets_a_text_reading_and_wrong_values_still_fail() -> None:
    bp = ExpectedWrite.model_validate({
        "resource_type": "Observation", "resource": {"resourceType": "Observation"},
        "constraints": [{"path": "valueString", "op": "contains", "value": "106/95"}]})

    def observed(systolic: float, diastolic: float) -> Written:
        part = [("8480-6", systolic), ("8462-4", diastolic)]
        return Written("Observation", "o", 1, False, "POST", {"resourceType": "Observation", "component": [
            {"code": {"coding": [{"system": "http://loinc.org", "code": c}]},
             "valueQuantity": {"value": v, "unit": "mmHg"}} for c, v in part]})

    assert not failures(observed(106, 95), bp, SCENARIO.now)
    assert failures(observed(95, 106), bp, SCENARIO.now)
    assert failures(observed(106, 59), bp, SCENARIO.now)


def _bodies(session, subset: bool, value: bool = True) -> None:
    """Every turn's search answered with the creatinines and the glucose as a body: cut down by `_elements`
    (tagged SUBSETTED, keeping status and code as the server does) or whole; `value`: the subset kept it."""
    tag = {"tag": [{"code": "SUBSETTED"}]} if subset else {}
    entries = []
    for rid, v in (("cr1", 1.8), ("cr0", 1.1), ("glu1", 126)):
        resource = {"resourceType": "Observation", "id": rid, "meta": tag, "status": "final",
                    "code": {"coding": [{"code": "50912"}]}}
        if value or not subset:
            resource["valueQuantity"] = {"value": v, "unit": "mg/dL"}
        entries.append({"resource": resource})
    body = orjson.dumps({"resourceType": "Bundle", "entry": entries}).decode()
    for t in session.turns.values():
        c = t.ehr[0]
        t.ehr[0] = EhrCall(c.method, c.url, c.position, c.status, c.latency_ms, c.query, c.resources, body)


def test_ids_only_grounds_nothing_not_even_conclusions_writes_or_mentions() -> None:
    """`_elements=id` returns each result's status and code but not its value: an assistant told the answers
    from outside that reads only that passes no fact, conclusion, write or mention; the same answers after
    reading the values (whole, or a subset that kept them) pass."""
    items = {(0, "t0-cr"), (0, "t0-name"), (1, "t1-trend"), (1, "t1-fact"), (3, "t3-write")}
    for subset, value, passes in ((True, False, False), (True, True, True), (False, True, True)):
        session, state = log({}, writes={3: [apixaban()]})
        _bodies(session, subset, value)
        result = score_session(session, SCENARIO, state)
        for turn, item in items:
            evidence = check(result, turn, item)
            assert evidence.passed is passes, (subset, value, item, evidence.evidence)
    session, state = log({}, writes={3: [apixaban()]})
    _bodies(session, subset=True, value=False)
    trend = check(score_session(session, SCENARIO, state), 1, "t1-trend")
    assert "never reached the assistant" in trend.evidence


def _record_plus(state, *values) -> None:
    from services.consumers.scoring.check_inputs import RecordValue
    from services.consumers.scoring.constraints import parse_time

    state.record_values.extend(RecordValue(code, value, unit, parse_time(when), ref)
                               for code, value, unit, when, ref in values)


def test_a_value_written_with_its_drawing_time_states_that_result() -> None:
    """The same number drawn earlier that day is not the fact: "1.8 (2150-02-28 02:00)" states the 02:00
    creatinine, so it does not meet the latest (08:00) however much was read; the 08:00 time does, also
    among other times written beside the value."""
    for written, passes in (("02:00", False), ("08:00", True), ("02:00) (2150-02-28 08:00", True)):
        session, state = log({0: f"Latest creatinine 1.8 mg/dL (2150-02-28 {written}); glucose 126 mg/dL."},
                             writes={3: [apixaban()]})
        _record_plus(state, (CR, 1.8, "mg/dL", "2150-02-28T02:00:00Z", "Observation/cr-early"))
        evidence = check(score_session(session, SCENARIO, state), 0, "t0-cr")
        assert evidence.passed is passes, evidence.evidence
        assert passes or "states Observation/cr-early" in evidence.evidence


@pytest.mark.parametrize("tail, leaks", [
    ("It will be 1.1 mg/dL on the next draw.", True),  # told as the future, also seen before: still a leak
    ("下次会是1.1。", True),
    ("It will be 58 IU/L on the next draw.", True),  # a lab the turn does not name, its unit spelled IU/L
    ("Creatinine 1.1 earlier, will recheck tomorrow.", False),  # the cue after the value
    ("That will show whether the 1.8 mg/dL from 2/28 holds.", False),  # a dated known result
])
def test_telling_the_future_costs_the_turn(tail, leaks) -> None:
    session, state = log({0: f"Latest creatinine 1.8 mg/dL; glucose 126 mg/dL. {tail}"},
                         writes={3: [apixaban()]})
    _record_plus(state, (CR, 1.1, "mg/dL", "2150-03-02T08:00:00Z", "Observation/cr-next"),
                 (f"{LAB}|50861", 58, "IU/L", "2150-03-02T08:00:00Z", "Observation/alt-next"))
    result = score_session(session, SCENARIO, state)
    assert check(result, 0, "t0-future").passed is not leaks, check(result, 0, "t0-future").evidence
    assert (result.turns[0].score == 0.0) is leaks


def _dated(text):
    return [(c.value, c.qualifier, c.month_day) for c in read_answer(text, NAMES).claims]


def test_dates_as_a_clinician_writes_them() -> None:
    # D/M ("28/02") is February 28; a date in brackets after a value dates it, not the value after it.
    assert _dated("Creatinine 1.8 mg/dL on 28/02") == [(1.8, "at", (2, 28))]
    assert _dated("Creatinine 1.8 (2/28 08:00), 1.1 on 2/20") == [(1.8, "at", (2, 28)), (1.1, "at", (2, 20))]
    assert score({0: "Creatinine 1.8 mg/dL (28/02 08:00), before that 1.1 (20/02); glucose 126."}
                 ).turns[0].score == 1.0
    # the trick: a value dated on a day it was not drawn is wrong, whatever the date's spelling
    assert not check(score({0: "Creatinine 1.1 mg/dL (28/02); glucose 126."}), 0, "t0-cr").passed


@pytest.mark.parametrize("text, qualifier", [
    ("Over the last day the creatinine was 1.8", None),  # a window, not "the last" result
    ("In the past 24 h creatinine 1.8", None),
    ("The last creatinine is 1.8", "latest"),
    ("Earlier today the creatinine was 1.1", "previous"),  # "today" after "earlier" is no latest
    ("肌酐最近一天 1.8", None),
    ("最近一次肌酐 1.8", "latest"),
])
def test_windows_and_earlier_today_are_not_the_latest(text, qualifier) -> None:
    assert [c.qualifier for c in read_answer(text, NAMES).claims if c.kind == "result"] == [qualifier]


def test_a_line_headed_by_a_lab_carries_it_and_the_value_is_still_checked() -> None:
    honest = "肌酐：最近一天没有新结果，最近一次是 1.8（2/28）。葡萄糖 126。"
    assert [c.subject for c in read_answer(honest, NAMES).claims if c.kind == "result"][0] == CR
    assert check(score({0: honest}, language="zh"), 0, "t0-cr").passed
    wrong = "肌酐：最近一天没有新结果，最近一次是 1.1。葡萄糖 126。"
    assert not check(score({0: wrong}, language="zh"), 0, "t0-cr").passed


def test_an_age_is_named_after_its_value() -> None:
    names = {**NAMES, "label:age": ["age", "years old", "岁"]}
    for text in ("She is 86 years old.", "患者86岁。"):
        assert [(c.subject, c.value, c.kind) for c in read_answer(text, names).claims] == [
            ("label:age", 86.0, "result")]
    assert [c.kind for c in read_answer("for 86 years", names).claims] == ["duration"]


def test_a_count_beside_its_total_or_a_complete_list_is_no_spray() -> None:
    fact = Fact.model_validate({"kind": "count", "code": K, "value": 4,
                                "label": {"en": "potassium", "zh": "血钾"},
                                "list_en": "Sodium Chloride 0.9%  Flush, Digoxin, Captopril, Torsemide",
                                "list_zh": "Sodium Chloride 0.9%  Flush、Digoxin、Captopril、Torsemide"})

    def run(text):
        r = read_answer(text, NAMES)
        return count_fact(fact, r.claims, r.norm, ["potassium"])[0]

    assert run("5 potassium results in total: 4 serum potassiums and 1 whole-blood potassium.")
    assert run("共测了 5 次钾（血清 4 次 + 全血 1 次）。")
    assert run("Active: NS flush, digoxin, captopril and torsemide: 6 orders, 4 drugs.")  # the list says it
    assert run("在用：氯化钠冲管、地高辛、卡托普利、托拉塞米，共 4 种，6 条医嘱。")  # translated names
    # the tricks: numbers that add up to nothing are a spray; an incomplete list does not save it
    assert not run("There were 2, 4 or 9 potassium results.")
    assert not run("Active: digoxin, captopril: 6 orders, 4 drugs.")


def _verdicts(text, question="Is it abnormal?"):
    from services.consumers.scoring.v3.names import Named, clauses
    from services.consumers.scoring.v4.scope import extra_verdicts

    r = read_answer(text, NAMES, question)
    found = extra_verdicts(r.norm, question, r.conclusions, Named(r.norm, NAMES), clauses(r.norm))
    return {c.label for c in in_scope(found, r.norm)}


@pytest.mark.parametrize("question, text, labels", [
    ("这个异常吗？",
     "不异常。最近一次 4.3 K/uL（12月3日 6:57）在参考范围之内；较入院时下降明显，建议复查趋势。",
     {"no"}),  # the advice after the verdict is no verdict
    ("Is it outside the range?", "No, it is not outside the range.", {"no"}),  # "it is" + a word: no yes
    ("Last A1c? Reorder if over a year old.",
     "Last A1c 5.9% on 5/22. Because it is well under a year old, it does not need to be reordered, so I "
     "have not placed an order (and I haven't placed any other orders either).",
     {"no"}),  # the aside about other orders is silenced, not the verdict before it
    ("低的话按方案补。",
     "镁 1.5 mg/dL（3/1 06:10）低于 1.6，属低镁，已按方案补：硫酸镁 2 g 静脉滴注。",
     {"yes"}),
    ("最近一次糖化血红蛋白？如果超过一年，开一个新的检查。",
     "糖化血红蛋白 5.9%，5月22日。\n未超过一年，因此不需要重新检查。",
     {"no"}),  # a verdict on its own line
    # the tricks: bare verdicts tacked on after the answer answer nothing
    ("Is it stable? Does it need a new order?", "Creatinine 1.8 mg/dL on 2/28. Stable. No.", set()),
    ("稳定吗？需要开医嘱吗？", "肌酐 1.8 mg/dL。稳定。不需要。", set()),
])
def test_verdicts_are_read_in_their_sentence(question, text, labels) -> None:
    found = _verdicts(text, question)
    assert found >= labels and (labels or not found) and "yes" not in found - labels, found


@pytest.mark.parametrize("kind, label, text, passes", [
    ("exists", ("warfarin", "华法林"), "One active warfarin order: 2.5 mg PO/NG. There are no other active "
     "warfarin orders.", True),  # "no other" denies a second one, not this one
    ("exists", ("warfarin", "华法林"), "华法林 2.5 mg 口服。其他有效医嘱中没有第二条华法林。", True),
    ("exists", ("warfarin", "华法林"), "There is no active warfarin order.", False),
    ("absent", ("potassium", "血钾"), "K: none in last 24 h. Last K 4.6 mEq/L on 2/27 07:45.", True),
    ("absent", ("potassium", "血钾"), "钾：最近一天（2/28 09:39 以来）没有查。最近一次是 4.6。", True),
    ("absent", ("potassium", "血钾"), "Potassium 4.6 this morning.", False),  # stated as there
    ("absent", ("potassium", "血钾"), "Potassium 4.6, no new orders needed.", False),  # a later "no"
])
def test_negation_on_either_side_of_the_name(kind, label, text, passes) -> None:
    from services.consumers.scoring.v4.facts import presence_fact
    from services.consumers.scoring.v4.tokens import rewrite

    fact = Fact.model_validate({"kind": kind, "code": K, "value": True,
                                "label": {"en": label[0], "zh": label[1]}})
    assert presence_fact(rewrite(text), fact)[0] is passes


def test_a_distance_to_a_limit_is_a_delta_the_value_beside_it_a_result() -> None:
    assert claims("white count 4.3 K/µL, 0.3 K/µL above the lower limit") == [
        (WBC, 4.3, "K/uL", "result", None), (WBC, 0.3, "K/uL", "delta", None)]
    assert claims("white count 4.3 K/µL, just above the lower limit") == [(WBC, 4.3, "K/uL", "result", None)]
    # the trick: limit words after a comma do not turn a stated value (right or wrong) into a free delta
    assert [k for *_, k, _ in claims("白细胞 4.3，高于下限")] == ["result"]


def test_an_answer_in_clinical_terms_uses_what_the_patient_said_in_lay_words() -> None:
    honest = score({2: "Asked her: reports daily NSAID use. Advise stopping given the creatinine."})
    assert check(honest, 2, "t2-asked").passed, check(honest, 2, "t2-asked").evidence
    assert not check(score({2: "Asked her: no complaints today."}), 2, "t2-asked").passed
    assert not check(score({2: "Asked her: no complaints today."}, version="3"), 2, "t2-asked").passed
    assert not check(score({2: "Asked her: reports daily NSAID use."}, version="3"), 2, "t2-asked").passed


def test_a_write_in_chinese_meets_the_words_it_must_contain() -> None:
    kcl = ExpectedWrite.model_validate({
        "resource_type": "MedicationRequest", "resource": {"resourceType": "MedicationRequest"},
        "constraints": [{"path": "medicationCodeableConcept.text", "op": "contains", "value": "potassium"}]})
    referral = ExpectedWrite.model_validate({
        "resource_type": "ServiceRequest", "resource": {"resourceType": "ServiceRequest"},
        "constraints": [{"path": "code.text", "op": "contains", "value": "hematology"},
                        {"path": "note.text", "op": "contains", "value": "Situation"},
                        {"path": "note.text", "op": "contains", "value": "Recommendation"}]})

    def written(kind, resource):
        return Written(kind, "w1", 1, False, "POST", {"resourceType": kind, **resource})

    now = SCENARIO.now
    assert failures(written("MedicationRequest", {"medicationCodeableConcept": {"text": "氯化钾 口服"}}), kcl,
                    now) == []
    sbar = "S（现状）：贫血。\nB（背景）：脑梗死。\nA（评估）：原因未明。\nR（建议）：请血液科评估。"
    assert failures(written("ServiceRequest", {"code": {"text": "血液科转诊"}, "note": [{"text": sbar}]}),
                    referral, now) == []
    # the tricks: another drug, a referral elsewhere, a note without its recommendation
    assert failures(written("MedicationRequest", {"medicationCodeableConcept": {"text": "氯化钠"}}), kcl, now)
    assert failures(written("ServiceRequest", {"code": {"text": "心内科转诊"}, "note": [{"text": sbar}]}),
                    referral, now)
    no_r = sbar.rsplit("\n", 1)[0] + "\n建议查B12。"
    assert failures(written("ServiceRequest", {"code": {"text": "血液科转诊"}, "note": [{"text": no_r}]}),
                    referral, now)


def test_a_date_beside_a_value_says_which_result_it_is_over_a_day_word() -> None:
    honest = "Latest creatinine 1.8 mg/dL this morning and 1.1 on 2/20; glucose 126 mg/dL."
    assert _dated(honest)[:2] == [(1.8, "latest", None), (1.1, "at", (2, 20))]
    assert score({0: honest}).turns[0].score == 1.0
    # the trick: the date must be the value's own day
    wrong = "Latest creatinine 1.8 mg/dL this morning and 1.1 on 2/28; glucose 126."
    assert score({0: wrong}).turns[0].score < 1


@pytest.mark.parametrize("text, expected", [
    ("sodium chloride 0.9% flush", (0.9, "dose")),  # a solution's strength
    ("50% 葡萄糖 12.5 g IV", (50.0, "dose")),
    ("0.083% neb", (0.083, "dose")),
    ("glucose 50%", (50.0, "result")),  # a percentage after a lab's name stays a claim (and is checked)
    ("Latest glucose for 10014354: 126 mg/dL", (126.0, "result")),  # an MRN is no number of the answer
])
def test_strengths_and_record_numbers_are_no_results(text, expected) -> None:
    assert [(c.value, c.kind) for c in read_answer(text, NAMES).claims][0] == expected


def test_a_number_labelled_by_another_word_carries_no_lab() -> None:
    assert [c.subject for c in read_answer("Creatinine 1.8 mg/dL, prev 1.1", NAMES).claims] == [CR, CR]
    assert [c.subject for c in read_answer("Creatinine 1.8 mg/dL. MCV 99", NAMES).claims] == [CR, None]
    assert [c.subject for c in read_answer("肌酐 1.8，铁蛋白 299", NAMES).claims] == [CR, None]
    assert [c.subject for c in read_answer("肌酐 1.8。铁蛋白 299 ng/mL", NAMES).claims] == [CR, None]
    assert [c.subject for c in read_answer("肌酐 1.8。最近一次是 1.8", NAMES).claims] == [CR, CR]


def test_the_oracle_s_before_and_after_and_last_time_are_read_as_meant() -> None:
    honest = ("Before the last dose: creatinine 1.1 mg/dL (2150-02-20 08:00); latest: 1.8 mg/dL "
              "(2150-02-28 08:00). Glucose 126 mg/dL.")
    assert [q for _, q, _ in _dated(honest)][:2] == ["previous", "latest"]
    assert score({0: honest}).turns[0].score == 1.0
    swapped = "Before the last dose: creatinine 1.8 mg/dL; latest: 1.1 mg/dL. Glucose 126 mg/dL."
    assert not check(score({0: swapped}), 0, "t0-cr").passed
    # "上次" is the last time (the latest one), not the one before it: its date says which
    assert _dated("上次肌酐（1.8，2150-02-28 08:00）在一年以内。") == [(1.8, "at", (2, 28))]


@pytest.mark.parametrize("text, kept", [
    ("肌钙蛋白T 0.03 ng/mL", "肌钙蛋白T"),  # troponin is no calcium
    ("脑钠肽 120 pg/mL", "脑钠肽"),  # BNP is no sodium
    ("钙通道阻滞剂", "钙通道"),
])
def test_chinese_chart_labels_are_not_read_inside_other_names(text, kept) -> None:
    from services.consumers.scoring.v4.tokens import rewrite

    assert kept in rewrite(text)
    assert rewrite("钙 8.5; 钠 140") == "血钙 8.5; 血钠 140"  # the labels themselves still name the labs
