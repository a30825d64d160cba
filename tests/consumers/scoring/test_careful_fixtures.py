"""The careful-assistant fixtures of issue 36 (tests/fixtures/careful/: event logs of careful answers to real
demo sessions, EN and ZH, and a physician's verdict on every rubric item) re-scored with scorer v4: the
scorer agrees with the physician on >= 95 % of the items, and the careful answers average >= 0.85 and
>= the baseline's + 0.25 on the same scenarios, in each language.

A session's final state is its recorded `rounds.sandbox.state` (its blob line when large) when the log
holds one; else the scorer's replay of the logged writes (services/consumers/scoring/replay.py) with the
record's values from a store holding the real demo: `ROUNDS_CAREFUL_STORE` when set (a copy of what `rounds
demo` maps and loads), else the suite's own (tests/conftest.py `full_demo_url`, built when ../shared/data
holds the demo, as in CI); the baseline is replayed there too. Only a machine without the demo has no such
store: a replayed state then holds no record values (claims are verified against the session's facts only),
the must-shows are expected to fail and the baseline comparison is skipped.
"""

from __future__ import annotations

import asyncio
import base64
import json
import os
from collections import defaultdict
from pathlib import Path

import pytest

from contracts.trajectory_log import LoggedEvent, build_trajectory
from services.consumers.scoring import replay
from services.consumers.scoring.check_inputs import FinalState
from services.consumers.scoring.scenarios import scenario_of
from services.consumers.scoring.scorer import score_session
from tests.conftest import SHARED_DATA
from tests.wiring import client_on, migrated, root_on

CAREFUL = Path(__file__).resolve().parents[2] / "fixtures" / "careful"
VERDICTS = CAREFUL / "verdicts.json"
STORE = os.environ.get("ROUNDS_CAREFUL_STORE")
DEMO = (SHARED_DATA / "mimic-iv-demo" / "hosp" / "patients.csv.gz").exists()

pytestmark = [pytest.mark.slow, pytest.mark.timeout(1800),  # the whole demo built: minutes on a busy machine
              pytest.mark.skipif(not VERDICTS.exists(), reason="the careful fixtures and their verdicts are "
                                                               "merged from their own branches")]


def logs() -> tuple[dict[str, list[LoggedEvent]], dict[str, bytes]]:
    """Each session's events, and the blobs the dumps carry (`{"roundsBlob": ref, "dataBase64": ...}`)."""
    by: dict[str, list[LoggedEvent]] = defaultdict(list)
    blobs: dict[str, bytes] = {}
    for path in sorted(CAREFUL.glob("*-events.jsonl")):
        for line in path.read_text(encoding="utf-8").splitlines():
            if not line.strip():
                continue
            e = json.loads(line)
            if "roundsBlob" in e:
                blobs[e["roundsBlob"]] = base64.b64decode(e["dataBase64"])
            else:
                by[e["subject"]].append(LoggedEvent(e["type"], e.get("data") or {}, e.get("time")))
    return by, blobs


def state_of(events: list[LoggedEvent], blobs: dict[str, bytes], scenario, reader) -> FinalState:
    """The recorded state, else the replayed writes with the record's values (none without the store: as
    `score_events` rebuilds a state, facts are then verified against the session's own facts only)."""
    if any(e.type == "rounds.sandbox.state" for e in events) or reader is None:
        return replay.state_of_log(events, blobs)
    from services.consumers.scoring.fhir_state import record_codes

    codes = sorted({f.code for t in scenario.turns for f in t.facts if f.code} | set(record_codes()))
    values = [v for code in codes for v in reader.record_values(scenario.patient, code)]
    return replay.state_of_log(events, blobs, values)


@pytest.fixture(scope="module")
def store(request: pytest.FixtureRequest) -> str | None:
    """The store holding the real demo: the override, else the suite's own, else none."""
    if STORE:
        return STORE
    return request.getfixturevalue("full_demo_url") if DEMO else None


@pytest.fixture(scope="module")
def reader(store: str | None):
    if not store:
        return None
    from rounds.settings import Settings
    from services.consumers.scoring.fhir_state import StateReader

    return StateReader(client_on(Settings(database_url=store)))


@pytest.fixture(scope="module")
def scored(reader):
    out = {}
    by, blobs = logs()
    texts = {ref: body.decode(errors="replace") for ref, body in blobs.items()}
    for session, events in by.items():
        log = build_trajectory(session, events, texts)
        scenario = scenario_of(log.started, None)
        state = state_of(events, blobs, scenario, reader)
        if scenario is not None and state is not None and log.reason == "completed":
            out[session] = (log, scenario, score_session(log, scenario, state))
    assert out, "no careful session could be scored"
    return out


NEEDS_RECORD = pytest.mark.xfail(
    not STORE and not DEMO, strict=True,
    reason="the must-shows are measured against the record: without the demo claims are verified against "
           "the session's facts only (true extras read as invented): 460 of 498 agree (92.4 %), careful Avg "
           "EN 0.74, ZH 0.75; with it (branch v4t) 479 of 498 (96.2 %), EN 0.91, ZH 0.86")


@NEEDS_RECORD
def test_v4_agrees_with_the_physician(scored) -> None:
    verdicts = json.loads(VERDICTS.read_text(encoding="utf-8"))
    agree, total, disagreements = 0, 0, []
    for v in verdicts:
        if v["session"] not in scored:
            continue
        turn = scored[v["session"]][2].turns[v["turn"]]
        check = next((c for c in turn.checks if c.id == v["item"]), None)
        if check is None:
            continue
        total += 1
        if check.passed == (v["verdict"] == "pass"):
            agree += 1
        else:
            disagreements.append((v["session"][:8], v["turn"], v["item"], v["verdict"], check.evidence[:120]))
    assert total, "no verdict names a scored item"
    assert agree / total >= 0.95, (agree, total, disagreements[:20])


@NEEDS_RECORD
def test_careful_answers_score_high_and_beat_the_baseline(scored, store: str | None) -> None:
    by_language: dict[str, list[float]] = defaultdict(list)
    for log, _, score in scored.values():
        by_language[log.language].append(score.score or 0.0)
    for language, scores in by_language.items():
        assert sum(scores) / len(scores) >= 0.85, (language, scores)
    if not store:
        pytest.skip("no store holds the real demo: the baseline is not replayed")
    from rounds.settings import Settings
    from services.consumers.scoring.api import score_run
    from services.simulator.orchestrator.entry import RunOptions, run_scenarios
    from services.simulator.orchestrator.jobs import plan

    for language, scores in by_language.items():
        chosen = {(s.id, log.variant): s for log, s, _ in scored.values()
                  if log.language == language}
        jobs = [job for (sid, variant), s in chosen.items()
                for job in plan([(s, s.model_dump(mode="json"))], 1, (language,), variant)]
        run_id = f"careful-baseline-{language}"
        settings = Settings(database_url=store)
        asyncio.run(run_scenarios(jobs, "baseline", RunOptions(run_id), migrated(settings)))
        baseline = score_run(root_on(settings), run_id, timeout_s=600).metrics.avg or 0.0
        assert sum(scores) / len(scores) >= baseline + 0.25, (language, sum(scores) / len(scores), baseline)
