"""The model's mistakes are charged as Rounds charges them for `openai:` (the session ends and is scored),
while a FHIR 4xx goes back to the model as the server's OperationOutcome."""

from __future__ import annotations

import pytest

from tests.rounds.inspect.policy import call, scripted
from tests.rounds.inspect.test_limits import ended, only_sample
from tests.rounds.inspect.test_task import run

pytestmark = pytest.mark.slow  # each runs an Inspect eval (a few seconds)


def first_then(models, first):
    """`first` for the model's first call, the scripted assistant after."""
    script, seen = scripted(models), {"n": 0}

    def policy(messages, tools, tool_choice, config):
        seen["n"] += 1
        return first if seen["n"] == 1 else script(messages, tools, tool_choice, config)

    return policy


def test_an_unknown_tool_ends_the_session_assistant_error_and_it_is_scored(rounds_db, scenario_file,
                                                                            scenario_models):
    log = run(scenario_file, scenario_models, policy=first_then(scenario_models, call("rm_rf", {})))
    assert log.status == "success"
    sample = only_sample(log)
    meta = sample.metadata["rounds"]
    assert meta["reason"] == "assistant_error" and "unknown tool 'rm_rf'" in meta["error"]
    assert ended(rounds_db, meta["session"])["reason"] == "assistant_error"
    assert sample.scores["rounds_scorer"].value == 0.0  # charged to the assistant: every turn unreached


def test_a_fhir_4xx_is_the_model_s_to_fix_and_the_session_goes_on(rounds_db, scenario_file, scenario_models):
    bad = call("fhir_read", {"resourceType": "Observation", "id": "no-such-observation"})
    log = run(scenario_file, scenario_models, policy=first_then(scenario_models, bad))
    sample = only_sample(log)
    assert sample.metadata["rounds"]["reason"] == "completed"
    [tool] = [m for m in sample.messages if m.role == "tool" and m.function == "fhir_read"]
    assert tool.error is not None and tool.error.message == "HTTP 404"
    assert "OperationOutcome" in tool.text
    assert sample.scores["rounds_scorer"].value > 0.5


def test_invalid_arguments_are_returned_to_the_model_once_then_charged(rounds_db, scenario_file,
                                                                        scenario_models):
    wrong = call("fhir_search", {"params": {"code": "x"}})  # no resourceType
    log = run(scenario_file, scenario_models, policy=lambda *args: wrong)
    sample = only_sample(log)
    tools = [m for m in sample.messages if m.role == "tool"]
    assert tools and tools[0].error is not None and "resourceType" in tools[0].error.message
    meta = sample.metadata["rounds"]
    assert meta["reason"] == "assistant_error" and "2 invalid tool calls" in meta["error"]
