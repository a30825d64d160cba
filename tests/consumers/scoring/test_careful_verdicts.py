"""The physician's verdicts on the careful-assistant logs (tests/fixtures/careful) are what a scorer is
measured against, so they must name real rubric items: every verdict points at a logged session and at an item
of that session's scenario with the same turn, kind and language, and a judged session has every one of its
items judged once. A log not yet committed (each language's log lands from its own branch): shape only."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

CAREFUL = Path(__file__).resolve().parents[2] / "fixtures" / "careful"
VERDICTS = CAREFUL / "verdicts.json"
KEYS = {"session", "turn", "item", "kind", "language", "verdict", "reason", "truth_doubtful", "answered"}


def _verdicts() -> list[dict]:
    return json.loads(VERDICTS.read_text(encoding="utf-8"))


def _rubrics(language: str) -> dict[str, tuple[str, dict[str, tuple[int, str]]]] | None:
    """Session id → (language, item id → (turn, kind)) from the committed log, or None if not committed."""
    log = CAREFUL / f"careful-{language}-events.jsonl"
    if not log.exists():
        return None
    sessions: dict[str, tuple[str, dict[str, tuple[int, str]]]] = {}
    for line in log.read_text(encoding="utf-8").splitlines():
        event = json.loads(line)
        if event.get("type") != "rounds.session.started":
            continue
        data = event["data"]
        items = {
            item["id"]: (turn["index"], item["kind"])
            for turn in data["scenarioDefinition"]["turns"]
            for item in turn["rubric"]
        }
        sessions[event["subject"]] = (data["language"], items)
    return sessions


def test_every_verdict_has_the_documented_shape() -> None:
    verdicts = _verdicts()
    assert verdicts, "verdicts.json is empty"
    for v in verdicts:
        assert v.keys() >= KEYS, v
        assert v["verdict"] in {"pass", "fail"}, v
        assert v["language"] in {"en", "zh"}, v
        assert isinstance(v["turn"], int) and v["turn"] >= 0, v
        assert v["reason"].strip(), v
        assert isinstance(v["truth_doubtful"], bool) and isinstance(v["answered"], bool), v
        assert not v["truth_doubtful"] or v.get("doubt_reason", "").strip(), f"doubt without a reason: {v}"
    keys = [(v["session"], v["item"]) for v in verdicts]
    assert len(keys) == len(set(keys)), "an item is judged twice"


@pytest.mark.parametrize("language", ["en", "zh"])
def test_verdicts_name_the_logged_rubric_items(language: str) -> None:
    sessions = _rubrics(language)
    judged = [v for v in _verdicts() if v["language"] == language]
    if sessions is None:
        assert judged, f"no {language} verdicts and no {language} log: nothing to check"
        return
    by_session: dict[str, set[str]] = {}
    for v in judged:
        assert v["session"] in sessions, f"verdict for a session not in the {language} log: {v['session']}"
        session_language, items = sessions[v["session"]]
        assert session_language == language, v
        assert v["item"] in items, f"{v['item']} is not a rubric item of {v['session']}"
        assert (v["turn"], v["kind"]) == items[v["item"]], v
        by_session.setdefault(v["session"], set()).add(v["item"])
    for session, items_judged in by_session.items():
        missing = set(sessions[session][1]) - items_judged
        assert not missing, f"{session}: items never judged {sorted(missing)}"


def test_a_wrong_item_name_is_caught(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The coverage check fails on a verdict whose item the logged scenario does not have."""
    sessions = _rubrics("zh")
    if sessions is None:
        pytest.skip("the ZH log is not committed on this branch")
    session = next(iter(sessions))
    bad = [
        {
            "session": session,
            "turn": 0,
            "item": "t0-9-invented",
            "kind": "fact_cited",
            "language": "zh",
            "verdict": "pass",
            "reason": "x",
            "truth_doubtful": False,
            "answered": True,
        }
    ]
    (tmp_path / "verdicts.json").write_text(json.dumps(bad), encoding="utf-8")
    for log in CAREFUL.glob("careful-*-events.jsonl"):
        (tmp_path / log.name).symlink_to(log)
    monkeypatch.setattr(sys.modules[__name__], "CAREFUL", tmp_path)
    monkeypatch.setattr(sys.modules[__name__], "VERDICTS", tmp_path / "verdicts.json")
    with pytest.raises(AssertionError, match="is not a rubric item"):
        test_verdicts_name_the_logged_rubric_items("zh")
