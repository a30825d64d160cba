"""`rounds report --run` on runs the real scorer scored: scripted sessions in the embedded SQL log with real
sandbox writes (tests/consumers/scoring's world), `score_run`, then the report of the original run compared
with its
counterfactual (oracle on the same scenario and trials) from the score projections."""

from __future__ import annotations

import pytest
from bs4 import BeautifulSoup
from typer.testing import CliRunner

from foundation.db import make_engine
from rounds.cli import app
from services.consumers.report.json_io import to_json
from services.consumers.scoring.api import load_report, score_run
from tests.consumers.scoring import world
from tests.consumers.scoring.conftest import World, make_world
from tests.wiring import root_on

STYLES = ["oracle", "nothing", "wrong_dose"]  # the original run's trials 0..2; trial 3: infrastructure


@pytest.fixture
def scored(sqlite_url: str):
    gen = make_world(sqlite_url)
    w: World = next(gen)
    for run, styles in (("base", STYLES), ("cf", ["oracle"] * len(STYLES))):
        for trial, style in enumerate(styles):
            session = w.session().start(w.scenario, run, trial=trial)
            world.play(session, w.scenario, style)
            session.end("completed", run=run)
        w.session().start(w.scenario, run, trial=len(styles)).end("infrastructure_error", run=run)
        score_run(
            root_on(w.settings),
            run,
            bus=w.bus,
            topics=(w.sessions,),
            scores_topic=w.scores,
            client=w.client,
            timeout_s=120,
        )
    yield w
    gen.close()


def test_report_of_a_scored_run_and_its_counterfactual(scored: World, tmp_path):
    html, out = tmp_path / "r.html", tmp_path / "r.json"
    url = scored.settings.database_url
    result = CliRunner().invoke(
        app,
        [
            "report",
            "--run",
            "base",
            "--compare",
            "cf",
            "--html",
            str(html),
            "--json",
            str(out),
            "--database-url",
            url,
        ],
    )
    assert result.exit_code == 0, result.output
    engine = make_engine(url)
    base, cf = load_report(engine, "base"), load_report(engine, "cf")
    engine.dispose()
    assert out.read_text() == to_json(base)
    assert f"{base.metrics.avg:.3f}" in result.output and "infrastructure_error" in result.output

    soup = BeautifulSoup(html.read_text(), "html.parser")
    rows = soup.select("#compare tr.turn-delta")
    by_trial = {}
    for row in rows:
        by_trial.setdefault(row["data-session"], []).append(row["data-status"])
    turns = len(scored.scenario.turns)
    assert by_trial[f"{scored.scenario.id} #1 (en explicit)"] == ["improved"] * turns  # nothing -> oracle
    assert by_trial[f"{scored.scenario.id} #2 (en explicit)"].count("improved") == 1  # the dose fixed
    assert set(by_trial[f"{scored.scenario.id} #0 (en explicit)"]) == {"unchanged"}  # oracle both times
    assert not soup.select('#compare tr[data-status="regressed"]')

    sessions = soup.select('section.sessions[data-run="base"] details.session')
    wrong_dose = next(s.session for s in base.sessions if s.trial == STYLES.index("wrong_dose"))
    wrong = next(d for d in sessions if d["data-session"] == wrong_dose)
    write = wrong.select_one('tr.check[data-check="t3-write"]')
    assert write["data-passed"] == "false" and "doseQuantity" in write.select_one("td.evidence").get_text()
    calls = wrong.select('li[data-kind="ehr"]')
    assert calls and {c.select_one(".method").get_text() for c in calls} == {"GET", "POST"}
    assert {c.select_one(".status").get_text() for c in calls} <= {"200", "201"}
    # who wrote each message comes through the scorer (a clarification goes both ways)
    senders = {
        (x.kind, x.sender) for s in base.sessions for t in s.turns for x in t.exchanges if x.kind != "ehr"
    }
    assert {
        ("doctor", "doctor"),
        ("question", "assistant"),
        ("patient", "patient"),
        ("assistant", "assistant"),
    } <= senders
    excluded = soup.select('section.sessions[data-run="base"] details.session[data-excluded="true"]')
    assert len(excluded) == 1 and cf.metrics.excluded_sessions == 1
