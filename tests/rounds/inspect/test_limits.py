"""Inspect's limits end the Rounds session with the matching end reason (and Inspect still records the limit
and scores the sample); a failure of Rounds or of the model endpoint is an Inspect sample error, retried,
never a score of 0."""

from __future__ import annotations

import anyio
import pytest

from contracts.end_reasons import NOT_ASSISTANT_FAULT
from events.archive import read_log
from events.topics import SESSIONS
from foundation.db import make_engine
from rounds.inspect.limits import cut_reason, end_reason
from services.consumers.scoring.api import load_report
from tests.rounds.inspect.policy import scripted
from tests.rounds.inspect.test_task import run
from tests.wiring import bus_on

pytestmark = pytest.mark.slow  # each runs an Inspect eval (a few seconds)


def endings(settings, session_id: str) -> list[dict]:
    bus = bus_on(settings)
    try:
        return [r.event.data for r in read_log(bus, [SESSIONS], session=session_id)
                if r.event is not None and r.event.type == "rounds.session.ended"]
    finally:
        bus.close()


def ended(settings, session_id: str) -> dict:
    return endings(settings, session_id)[0]


def only_sample(log):
    assert log.samples is not None and len(log.samples) == 1
    return log.samples[0]


@pytest.mark.parametrize("limit", [{"message_limit": 7}, {"token_limit": 250}])
def test_a_message_or_token_limit_ends_the_session_max_steps_and_the_sample_is_scored(
        rounds_db, scenario_file, scenario_models, limit):
    log = run(scenario_file, scenario_models, **limit)
    sample = only_sample(log)
    kind = next(iter(limit)).split("_")[0]
    assert sample.limit is not None and sample.limit.type == kind
    meta = sample.metadata["rounds"]
    assert meta["reason"] == "max_steps" == end_reason(kind)
    end = ended(rounds_db, meta["session"])
    assert end["reason"] == "max_steps" and f"Inspect {kind} limit" in end["error"]
    score = sample.scores["rounds_scorer"]
    assert score.metadata["rounds"]["reason"] == "max_steps"
    assert 0.0 <= score.value < 1.0  # the turns it never reached score 0, as in any max_steps session


def test_a_time_limit_cancels_the_sample_and_the_session_ends_timeout(rounds_db, scenario_file,
                                                                       scenario_models):
    script = scripted(scenario_models)

    async def slow(messages, tools, tool_choice, config):
        await anyio.sleep(0.25)
        return script(messages, tools, tool_choice, config)

    log = run(scenario_file, scenario_models, policy=slow, time_limit=1)
    sample = only_sample(log)
    assert sample.limit is not None and sample.limit.type == "time"
    meta = sample.metadata["rounds"]
    [end] = endings(rounds_db, meta["session"])  # ended once, with the turns it completed
    assert end["reason"] == "timeout" == meta["reason"] and "Inspect time limit" in end["error"]
    assert end["turns"] == meta["turns"]
    assert sample.scores["rounds_scorer"].metadata["rounds"]["reason"] == "timeout"


def test_an_operators_stop_ends_the_session_interrupted_as_ctrl_c_does():
    reason, detail = cut_reason(None, None)  # no limit recorded, no clock spent: somebody stopped it
    assert reason == "interrupted" and reason in NOT_ASSISTANT_FAULT and "cancelled" in detail


def failing_once(models):
    script, calls = scripted(models), {"n": 0}

    def policy(messages, tools, tool_choice, config):
        calls["n"] += 1
        if calls["n"] == 1:
            raise ConnectionError("the model endpoint went away")
        return script(messages, tools, tool_choice, config)

    return policy


def test_a_model_endpoint_failure_is_an_inspect_error_never_a_zero(rounds_db, scenario_file, scenario_models):
    log = run(scenario_file, scenario_models, policy=failing_once(scenario_models))
    assert log.status == "error"
    sample = only_sample(log)
    assert sample.error is not None and "infrastructure_error" in sample.error.message
    assert not sample.scores
    meta = sample.metadata["rounds"]
    assert ended(rounds_db, meta["session"])["reason"] == "infrastructure_error"
    engine = make_engine(rounds_db.database_url)
    try:
        report = load_report(engine, log.eval.eval_id)
    finally:
        engine.dispose()
    assert report.metrics.sessions == 0 and report.metrics.excluded_sessions == 1  # counted, not scored 0


def test_with_retry_on_error_inspect_runs_the_sample_again_in_a_fresh_sandbox(rounds_db, scenario_file,
                                                                               scenario_models):
    log = run(scenario_file, scenario_models, policy=failing_once(scenario_models), retry_on_error=1)
    assert log.status == "success", log.error
    sample = only_sample(log)
    assert sample.error_retries and "infrastructure_error" in sample.error_retries[0].message
    score = sample.scores["rounds_scorer"]
    assert score.value == 1.0
    engine = make_engine(rounds_db.database_url)
    try:
        report = load_report(engine, log.eval.eval_id)
    finally:
        engine.dispose()
    reasons = sorted(s.reason for s in report.sessions)
    assert reasons == ["completed", "infrastructure_error"]
    assert [s.score for s in report.sessions if s.reason == "completed"] == [score.value]
