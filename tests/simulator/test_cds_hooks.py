"""`cds-hooks:` — a CDS Hooks 2.0 service under test, Rounds the EHR: a stay's scenario replayed through a
service written from the spec's examples (tests/simulator/cds_service.py); discovery, patient-view at the
first turn, order-select/order-sign with the physician's order as draftOrders, prefetch filled from the
sandbox at the clock, fhirServer; cards recorded as rounds.cds.exchange, feedback sent; cards scored by the
cds_* rubric kinds and shown in the report; a failing or slow service charged like any assistant."""

from __future__ import annotations

import asyncio

import pytest

from contracts.scenario import Scenario
from services.simulator.orchestrator.entry import RunOptions, run_scenarios
from services.simulator.orchestrator.environment import free_port
from tests.fhir_api.hl7.conftest import admission_store  # noqa: F401 - fixture: a real MIMIC-IV demo stay, loaded
from tests.fhir_api.subscriptions.conftest import admission_ndjson  # noqa: F401 - the fixture admission_store reads
from tests.simulator.cds_service import CdsService, serve
from tests.simulator.conftest import jobs, session_events
from tests.wiring import migrated, root_on

RUBRIC = {
    0: [{"id": "t0-greets", "kind": "cds_card", "params": {"hook": "patient-view", "indicator": "info",
                                                           "terms": ["Ada"]}},
        {"id": "t0-quiet", "kind": "cds_no_card", "params": {"hook": "patient-view"}}],
    3: [{"id": "t3-warns", "kind": "cds_card", "params": {"hook": "order-sign", "terms": ["apixaban"]}},
        {"id": "t3-suggests", "kind": "cds_suggestion", "params": {
            "hook": "order-sign", "resource_type": "MedicationRequest",
            "constraints": [{"path": "dosageInstruction.text", "op": "contains", "value": "2.5 mg"}]}}],
}


@pytest.fixture
def cds() -> CdsService:
    state = CdsService()
    server = serve(state, free_port())
    yield state
    server.should_exit = True


def apixaban_stay(scenarios) -> list:
    """The fixture's apixaban scenario (creatinine 1.6, apixaban 2.5 mg, the physician orders 5 mg at turn 3)
    with the CDS rubric items added to its turns."""
    line = dict(scenarios[0][1])
    line["turns"] = [dict(t, rubric=t["rubric"] + RUBRIC.get(t["index"], [])) for t in line["turns"]]
    return jobs([(Scenario.model_validate(line), line)])


def checks_of(report) -> dict[str, tuple[bool, str]]:
    (session,) = report.sessions
    return {c.id: (c.passed, c.evidence) for t in session.turns for c in t.checks}


def test_a_stay_through_a_cds_service_fires_the_hooks_and_its_cards_are_scored(settings, scenarios, cds):
    from services.consumers.report.html_page import render_html
    from services.consumers.scoring.api import score_run

    summary = asyncio.run(run_scenarios(apixaban_stay(scenarios), f"cds-hooks:{cds.url}",
                                        RunOptions("run-cds"), migrated(settings)))
    assert summary.by_reason == {"completed": 1}, [o.error for o in summary.outcomes]
    (outcome,) = summary.outcomes
    assert [c["hook"] for c in cds.calls] == ["patient-view", "order-select", "order-sign"]
    view, select, sign = cds.calls
    assert select["context"]["selections"] == ["MedicationRequest/sim-apix-1"]
    assert select["context"]["draftOrders"] == sign["context"]["draftOrders"]
    assert view["context"] == {"userId": "Practitioner/rounds-physician", "patientId": "sim-p1"}
    assert view["fhirServer"].startswith("http://127.0.0.1:") and view["fhirServer"].endswith("/fhir")
    assert view["prefetch"]["patientToGreet"]["id"] == "sim-p1"  # filled from the sandbox
    latest = sign["prefetch"]["creatinine"]["entry"][0]["resource"]
    assert latest["id"] == "sim-cr-2" and latest["valueQuantity"]["value"] == 1.6  # the latest at the clock
    (draft,) = sign["context"]["draftOrders"]["entry"]
    assert draft["resource"]["status"] == "draft"
    assert "5 mg" in draft["resource"]["dosageInstruction"][0]["text"]
    assert all(len(c["hookInstance"]) == 36 for c in cds.calls)

    exchanges = [e.data for e in session_events(settings, outcome.session_id)
                 if e.type == "rounds.cds.exchange"]
    assert [(x["turn"], x["hook"], x["outcome"]) for x in exchanges] == [
        (0, "patient-view", "cards"), (0, "patient-view", "feedback"),
        (3, "order-select", "cards"), (3, "order-select", "feedback"),
        (3, "order-sign", "cards"), (3, "order-sign", "feedback")]
    assert exchanges[2]["cards"][0]["summary"] == "Selected: Apixaban"
    warning = exchanges[4]["cards"][0]
    (sent,) = [f for f in cds.feedback if f["service"] == "renal-dosing"]
    assert sent["feedback"][0]["card"] == warning["uuid"] and sent["feedback"][0]["outcome"] == "accepted"
    assert sent["feedback"][0]["acceptedSuggestions"] == [{"id": warning["suggestions"][0]["uuid"]}]
    (greeting,) = [f for f in cds.feedback if f["service"] == "patient-greeting"]
    assert greeting["feedback"][0]["outcome"] == "overridden"

    report = score_run(root_on(settings), "run-cds")
    verdicts = checks_of(report)
    for item in ("t0-greets", "t0-quiet", "t3-warns", "t3-suggests"):
        assert verdicts[item][0], verdicts[item]
    page = render_html(report)
    assert "CDS Hooks" in page and "Apixaban 5 mg twice daily with creatinine 1.6 mg/dL" in page
    assert "t3-suggests" in page


def test_with_auth_on_the_service_gets_the_sessions_token_and_reads_with_it(settings, scenarios, cds):
    secured = settings.model_copy(update={"auth": True})
    summary = asyncio.run(run_scenarios(apixaban_stay(scenarios), f"cds-hooks:{cds.url}",
                                        RunOptions("run-cds-auth"), migrated(secured)))
    assert summary.by_reason == {"completed": 1}, [o.error for o in summary.outcomes]
    view = cds.calls[0]
    auth = view["fhirAuthorization"]
    assert auth["token_type"] == "Bearer" and auth["patient"] == "sim-p1" and auth["expires_in"] > 0
    assert "patient/" in auth["scope"]  # the session token's own SMART scopes
    assert view["prefetch"]["patientToGreet"]["id"] == "sim-p1"  # Rounds' prefetch passed the access control
    assert cds.reads == [200]  # and so did the service's own read on fhirServer with that token


def test_a_noisy_service_with_the_wrong_suggestion_fails_those_checks(settings, scenarios, cds):
    from services.consumers.scoring.api import score_run

    cds.mode = "noisy"
    summary = asyncio.run(run_scenarios(apixaban_stay(scenarios), f"cds-hooks:{cds.url}",
                                        RunOptions("run-cds-noisy"), migrated(settings)))
    assert summary.by_reason == {"completed": 1}
    verdicts = checks_of(score_run(root_on(settings), "run-cds-noisy"))
    assert verdicts["t0-greets"][0] and verdicts["t3-warns"][0]
    assert not verdicts["t0-quiet"][0] and "Review all medications" in verdicts["t0-quiet"][1]
    assert not verdicts["t3-suggests"][0] and "fails dosageInstruction.text contains '2.5 mg'" in \
        verdicts["t3-suggests"][1]


@pytest.mark.parametrize(("mode", "reason", "said"), [("broken", "assistant_error", "HTTP 500"),
                                                      ("slow", "timeout", "deadline")])
def test_a_failing_or_slow_service_is_charged_like_any_assistant(settings, scenarios, cds, mode, reason,
                                                                 said):
    cds.mode = mode
    options = RunOptions(f"run-cds-{mode}", turn_timeout_s=2)
    (outcome,) = asyncio.run(run_scenarios(apixaban_stay(scenarios), f"cds-hooks:{cds.url}", options,
                                           migrated(settings))).outcomes
    assert outcome.reason == reason and said in outcome.error
    if mode == "broken":
        (exchange,) = [e.data for e in session_events(settings, outcome.session_id)
                       if e.type == "rounds.cds.exchange"]
        assert exchange["outcome"] == "error" and exchange["httpStatus"] == 500


def test_a_url_that_is_no_discovery_document_stops_the_run(settings, scenarios, cds):
    from services.simulator.assistant_protocol import EndpointUnavailable

    with pytest.raises(EndpointUnavailable, match="not a CDS Hooks discovery document"):
        asyncio.run(run_scenarios(apixaban_stay(scenarios), f"cds-hooks:{cds.url}/renal-dosing",
                                  RunOptions("run-cds-nothing"), migrated(settings)))


DEMO_PATIENT, DEMO_STAY = "cb70e6ae-90b1-562b-8ab0-467c65d18d5e", "cf839c93-8b18-58e1-be0d-61e0581ccde7"
# the MIMIC-IV demo admission 29600294: creatinine 1.0 on day 2, 2.0 at 13:35 on day 3 (peak 2.2), 1.1 on the
# day of discharge (2148-08-18 21:12 local)
CLOCKS = {"before-aki": "2148-08-15T16:00:00Z", "aki": "2148-08-16T18:00:00Z",
          "discharged": "2148-08-19T12:00:00Z"}
DEMO_RUBRIC = {
    "before-aki": [{"id": "sign-quiet", "kind": "cds_no_card", "params": {"hook": "order-sign"}}],
    "aki": [RUBRIC[3][0], RUBRIC[3][1]],
    "discharged": [{"id": "sign-quiet", "kind": "cds_no_card", "params": {"hook": "order-sign"}},
                   {"id": "discharge-aki", "kind": "cds_card", "params": {
                       "hook": "encounter-discharge", "terms": ["peaked at 2.2 mg/dL"]}}],
}


def demo_stay(scenarios) -> list:
    """The apixaban order replayed on a real MIMIC-IV demo stay at three clocks of it (the scenario's texts;
    its record-bound facts and items left out, the CDS items in)."""
    out = []
    for name, now in CLOCKS.items():
        line = dict(scenarios[0][1], id=f"demo-apixaban-{name}", patient=f"Patient/{DEMO_PATIENT}",
                    encounter=f"Encounter/{DEMO_STAY}", now=now)
        turns = [dict(t, facts=[], rubric=[{"id": f"t{t['index']}-mention", "kind": "entity_mentioned",
                                            "params": {"terms": ["cds"]}}]) for t in line["turns"]]
        last = turns[-1]
        order = dict(last["writes"][0]["resource"], subject={"reference": f"Patient/{DEMO_PATIENT}"})
        last["writes"] = [dict(last["writes"][0], resource=order)]
        last["rubric"] = DEMO_RUBRIC[name]
        line["turns"] = turns
        out.append((Scenario.model_validate(line), line))
    return jobs(out)


def test_a_demo_stay_at_three_clocks_warns_only_when_something_is_wrong(admission_store, scenarios,  # noqa: F811
                                                                        cds):
    from rounds.settings import Settings
    from services.consumers.scoring.api import score_run

    url, _ = admission_store
    settings = Settings(database_url=url)
    summary = asyncio.run(run_scenarios(demo_stay(scenarios), f"cds-hooks:{cds.url}",
                                        RunOptions("run-cds-demo"), migrated(settings)))
    assert summary.by_reason == {"completed": 3}, [o.error for o in summary.outcomes]
    report = score_run(root_on(settings), "run-cds-demo")
    verdicts = {s.scenario: {c.id: (c.passed, c.evidence) for t in s.turns for c in t.checks}
                for s in report.sessions}
    assert verdicts["demo-apixaban-before-aki"]["sign-quiet"][0]  # creatinine 1.0: nothing to say
    assert verdicts["demo-apixaban-aki"]["t3-warns"][0] and verdicts["demo-apixaban-aki"]["t3-suggests"][0]
    assert "creatinine 2 mg/dL" in verdicts["demo-apixaban-aki"]["t3-warns"][1]  # the latest at that clock
    after = verdicts["demo-apixaban-discharged"]
    assert after["sign-quiet"][0] and after["discharge-aki"][0], after
    discharges = [c for c in cds.calls if c["hook"] == "encounter-discharge"]
    assert [c["context"]["encounterId"] for c in discharges] == [DEMO_STAY]  # only once the stay had ended
