"""Turn-by-turn comparison of two runs: pairing by (scenario, trial, language, variant), improved / regressed
/ unchanged turns, sessions present in one run only, excluded sessions, and the checks whose verdict
changed."""

from __future__ import annotations

from services.consumers.report.compare import compare_runs


def test_oracle_replay_improves_every_turn_that_was_not_perfect(baseline, replay):
    comparison = compare_runs(baseline, replay)
    imperfect = sum(1 for s in baseline.sessions for t in s.turns if t.score < 1.0)
    perfect = sum(1 for s in baseline.sessions for t in s.turns if t.score == 1.0)
    assert comparison.turn_counts["improved"] == imperfect > 0
    assert comparison.turn_counts["unchanged"] == perfect
    assert comparison.turn_counts["regressed"] == 0
    assert len(comparison.pairs) == len(baseline.sessions)
    for pair in comparison.pairs:
        for t in pair.turns:
            if t.status == "improved":
                assert t.delta > 0 and t.changed_checks
                assert all(c.before is not True and c.after is True for c in t.changed_checks)
    unreached = [
        t for p in comparison.pairs for t in p.turns if t.before == 0.0 and not t.changed_checks[0].before
    ]
    assert any(t.changed_checks[0].before is None for t in unreached)  # a check only the replay has


def test_regressions_missing_turns_sessions_in_one_run_and_excluded_pairs(baseline, replay):
    sessions = list(replay.sessions)
    first = sessions[0]
    worse = first.turns[1].model_copy(
        update={
            "score": 0.0,
            "checks": [c.model_copy(update={"passed": False}) for c in first.turns[1].checks],
        }
    )
    sessions[0] = first.model_copy(update={"turns": [first.turns[0], worse]})  # turns 2.. gone
    dropped = sessions.pop(1)
    extra = dropped.model_copy(update={"scenario": "new-scenario-999"})
    sessions.append(extra)
    other = replay.model_copy(update={"sessions": sessions})

    comparison = compare_runs(baseline, other)
    pairs = {p.key: p for p in comparison.pairs}
    p0 = pairs[("renal-apixaban-001", 0, "en", "implicit")]
    statuses = [t.status for t in p0.turns]
    expected_turn1 = "regressed" if baseline.sessions[0].turns[1].score > 0 else "unchanged"
    assert statuses[1] == expected_turn1
    assert statuses[2:] == ["only_before"] * (len(baseline.sessions[0].turns) - 2)
    assert p0.turns[2].after is None and p0.turns[2].delta is None
    missing = pairs[("renal-apixaban-001", 1, "en", "implicit")]
    assert missing.after is None and {t.status for t in missing.turns} == {"only_before"}
    added = pairs[("new-scenario-999", 1, "en", "implicit")]
    assert added.before is None and {t.status for t in added.turns} == {"only_after"}
    assert comparison.pairs[-1] is added  # the after run's extras come last
    excluded = pairs[("k-replacement-002", 2, "en", "explicit")]
    assert excluded.turns == []  # an infrastructure error leaves nothing to compare
    assert sum(comparison.turn_counts.values()) == sum(len(p.turns) for p in comparison.pairs)


def test_excluded_on_either_side_is_never_improved_or_regressed(baseline):
    sessions = list(baseline.sessions)
    sessions[0] = sessions[0].model_copy(update={"reason": "infrastructure_error"})
    other = baseline.model_copy(update={"run": "other", "sessions": sessions})
    comparison = compare_runs(baseline, other)
    assert comparison.turn_counts["excluded"] == len(sessions[0].turns)
    assert comparison.turn_counts["improved"] == comparison.turn_counts["regressed"] == 0
