"""The JSON document: RunReport's own serialization in the published shape, read back unchanged; bad files are
reported with the file and the reason."""

from __future__ import annotations

import json

import pytest

from services.consumers.report.json_io import ReportFileError, read_json, to_json


def test_published_shape(baseline):
    doc = json.loads(to_json(baseline))
    assert doc["run"] == "run-baseline" and doc["scorer_version"] == "v2"
    metrics = doc["metrics"]
    assert metrics["avg"] == pytest.approx(baseline.metrics.avg)
    assert set(metrics["pass_at_turn"]) == {"0.6", "0.75"} == set(metrics["pass_at_session"])
    assert set(metrics["pass_hat_k"]) == {"1", "2"}
    assert {"family", "difficulty", "language", "variant"} <= set(doc["by"])
    assert set(doc["by"]["language"]) == {"en", "zh"}
    assert set(doc["by"]["difficulty"]["L2"]) >= {"avg", "pass_at_turn", "pass_at_session", "pass_hat_k"}
    session = doc["sessions"][0]
    assert {"scenario", "trial", "reason", "turns"} <= set(session)
    turn = session["turns"][0]
    assert {"index", "score", "checks"} <= set(turn)
    assert {"id", "kind", "passed"} <= set(turn["checks"][0])
    assert doc["sessions"][-1]["reason"] == "infrastructure_error" and doc["sessions"][-1]["score"] is None


def test_round_trip_is_exact(baseline, replay, tmp_path):
    for report in (baseline, replay):
        path = tmp_path / f"{report.run}.json"
        path.write_text(to_json(report))
        again = read_json(path)
        assert again == report
        assert to_json(again) == to_json(report)


def test_unknown_fields_survive_the_round_trip(baseline, tmp_path):
    doc = json.loads(to_json(baseline))
    doc["metrics"]["tool_latency_p99"] = 41.0
    doc["sessions"][0]["persona"] = "anxious"
    path = tmp_path / "extra.json"
    path.write_text(json.dumps(doc))
    back = json.loads(to_json(read_json(path)))
    assert back["metrics"]["tool_latency_p99"] == 41.0 and back["sessions"][0]["persona"] == "anxious"


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (None, "cannot read"),
        ("{not json", "not a scored-run document"),
        ('{"run": "r", "scorer_version": "v"}', "metrics"),
        ('{"run": "r", "scorer_version": "v", "metrics": {}, "sessions": [{"scenario": "s"}]}', "sessions.0"),
    ],
)
def test_bad_files_name_the_file_and_the_reason(tmp_path, content, message):
    path = tmp_path / "bad.json"
    if content is not None:
        path.write_text(content)
    with pytest.raises(ReportFileError) as err:
        read_json(path)
    assert str(path) in str(err.value) and message in str(err.value)
