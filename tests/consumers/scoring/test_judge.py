"""The optional LLM judge against a local fake OpenAI-compatible server (never a real model): llm_judge items
become checks with the model and prompt version in their evidence, the report shows the judge's agreement
with the deterministic checks, and a judge that cannot answer is a retry, not a failed item."""

from __future__ import annotations

import io
import json
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import uvicorn
from sqlalchemy import event
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from contracts.scenario import Scenario
from events.archive import dump, load
from events.projections.retry import RetryLater
from events.projections.runner import ProjectionRunner
from events.topics import topic_specs
from rounds.migrate import upgrade
from rounds.settings import Settings
from services.consumers.scoring import members
from services.consumers.scoring.api import score_run
from services.consumers.scoring.judge import PROMPT_VERSION, LlmJudge
from services.consumers.scoring.projection import ScorerProjection
from tests.consumers.scoring import world
from tests.consumers.scoring.conftest import World
from tests.wiring import bus_on, client_on, root_on

CALLS: list[dict] = []


async def completions(request: Request) -> JSONResponse:
    body = await request.json()
    CALLS.append(body)
    user = body["messages"][-1]["content"]
    answer = user.split("Assistant's answer:\n", 1)[1].split("\n\nCriterion:", 1)[0]
    if "GARBLE" in user:
        content = "I think so?"
    else:
        content = json.dumps({"passed": "1.8" in answer or "ibuprofen" in answer.lower(),
                              "reason": "fake judge"})
    return JSONResponse({"id": "x", "object": "chat.completion", "model": body["model"],
                         "choices": [{"index": 0, "message": {"role": "assistant", "content": content},
                                      "finish_reason": "stop"}]})


@pytest.fixture(scope="module")
def fake_openai() -> Iterator[str]:
    app = Starlette(routes=[Route("/v1/chat/completions", completions, methods=["POST"])])
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not server.started and time.monotonic() < deadline:
        time.sleep(0.02)
    yield f"http://127.0.0.1:{port}/v1"
    server.should_exit = True
    thread.join(timeout=10)


def judged_scenario(sc: Scenario) -> Scenario:
    data = sc.model_dump(mode="json")
    turn0 = data["turns"][0]
    criterion = {"en": "States the creatinine value.", "zh": "说出肌酐值。"}
    turn0["rubric"].append({"id": "t0-judge", "kind": "llm_judge", "params": {"criterion": criterion}})
    turn0["rubric"][0]["description"] = {"en": "Cites the latest creatinine.", "zh": "引用最近的肌酐。"}
    data["turns"][2]["rubric"][1]["description"] = {"en": "Names ibuprofen.", "zh": "提到布洛芬。"}
    return Scenario.model_validate(data)


def play_judged(w: World, run: str, styles: list[str]) -> Scenario:
    """One session of the judged scenario per style, trials 0, 1, ..."""
    sc = judged_scenario(w.scenario)
    for trial, style in enumerate(styles):
        session = w.session().start(sc, run, trial=trial)
        world.play(session, sc, style)
        session.end(run=run)
    return sc


def test_judge_items_and_agreement_in_the_report(scoring_world: World, fake_openai: str) -> None:
    w = scoring_world
    play_judged(w, "judged", ["oracle", "nothing"])
    judge = LlmJudge.from_spec(f"fake-model@{fake_openai}")
    report = score_run(root_on(w.settings), "judged", bus=w.bus, topics=(w.sessions,), scores_topic=w.scores,
                       client=w.client, judge=judge, timeout_s=120)
    by_trial = {s.trial: s for s in report.sessions}
    check = next(c for c in by_trial[0].turns[0].checks if c.id == "t0-judge")
    assert check.passed and f"fake-model/{PROMPT_VERSION}" in check.evidence
    assert not next(c for c in by_trial[1].turns[0].checks if c.id == "t0-judge").passed
    assert report.judge["model"] == "fake-model" and report.judge["prompt_version"] == PROMPT_VERSION
    assert report.judge["items"] == 2 and report.judge["passed"] == 1
    # two described deterministic items per session, both judged the same way by the fake judge
    assert report.judge["compared"] == 4 and report.judge["agreement"] == 1.0
    assert all(call["model"] == "fake-model" and call["temperature"] == 0 for call in CALLS)
    # without a judge the same scenario scores without its llm_judge item and reports no judge
    plain = score_run(root_on(w.settings), "judged", scorer_version="nojudge", bus=w.bus,
                      topics=(w.sessions,),
                      scores_topic=w.scores, client=w.client, timeout_s=120)
    assert plain.judge is None
    assert all(c.kind != "llm_judge" for s in plain.sessions for t in s.turns for c in t.checks)


def test_unreadable_verdicts_fail_the_item_and_an_unreachable_judge_is_a_retry(fake_openai: str) -> None:
    from contracts.scenario import RubricItem
    from contracts.trajectory import Trajectory, TrajectoryTurn, Utterance
    from services.consumers.scoring.check_inputs import CheckContext, FinalState

    sc = world.scenario({"patient": "p", "cr_old": "a", "cr": "b", "cr_future": "c", "glucose": "d"})
    log = TrajectoryTurn(0, doctor=Utterance("doctor", "q", 0, "d"),
                         messages=[Utterance("answer", "1.8", 1, "a")])
    ctx = CheckContext(sc, sc.turns[0], log, Trajectory("s", turns={0: log}), FinalState(), "en")
    garbled = RubricItem(id="g", kind="llm_judge", params={"criterion": {"en": "GARBLE", "zh": "GARBLE"}})
    result = LlmJudge("m", fake_openai)(garbled, ctx)
    assert not result.passed and "unreadable" in result.evidence
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        dead = f"http://127.0.0.1:{s.getsockname()[1]}/v1"
    with pytest.raises(RetryLater):
        LlmJudge("m", dead, timeout_s=2)(garbled, ctx)
    with pytest.raises(ValueError):
        LlmJudge.from_spec("no-base-url")


class OutsideTransactions:
    """Wraps a judge: records, for each verdict asked, how many transactions of the scorer's engine were
    open, and fails its first `fail_first` calls with RetryLater (a judge that is down for a moment)."""

    def __init__(self, judge: LlmJudge, fail_first: int = 0) -> None:
        self.judge, self.fail_first = judge, fail_first
        self.model, self.prompt_version = judge.model, judge.prompt_version
        self.open_transactions: list[int] = []
        self.asked: list[tuple[str, int, str]] = []
        self.engine_open = 0

    def describe(self) -> dict:
        return self.judge.describe()

    def watch(self, engine):
        def begin(_conn) -> None:
            self.engine_open += 1

        def end(_conn) -> None:
            self.engine_open -= 1

        event.listen(engine, "begin", begin)
        event.listen(engine, "commit", end)
        event.listen(engine, "rollback", end)
        return engine

    def __call__(self, item, ctx):
        self.open_transactions.append(self.engine_open)
        if self.fail_first > 0:
            self.fail_first -= 1
            raise RetryLater("judge down for a moment")
        self.asked.append((ctx.session.session_id, ctx.log.index, item.id))
        return self.judge(item, ctx)


def test_the_judge_is_asked_before_the_transaction_once_per_item(scoring_world: World, fake_openai: str,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    w = scoring_world
    play_judged(w, "ahead", ["oracle", "nothing", "leaky"])
    spy = OutsideTransactions(LlmJudge.from_spec(f"fake-model@{fake_openai}"), fail_first=1)
    root = root_on(w.settings)
    spy.watch(root.engine())  # the engine the re-score runs on: the process's
    report = score_run(root, "ahead", bus=w.bus, topics=(w.sessions,), scores_topic=w.scores,
                       client=w.client, judge=spy, timeout_s=120)
    assert spy.open_transactions and set(spy.open_transactions) == {0}  # never inside a transaction
    # the failed call rolled the batch back and it was judged again: 3 items per session, all judged
    assert len(set(spy.asked)) == 3 * 3
    assert report.judge["items"] == 3 and report.judge["passed"] == 2 and report.judge["compared"] == 6
    by_trial = {s.trial: s for s in report.sessions}
    assert next(c for c in by_trial[2].turns[0].checks if c.id == "t0-judge").passed
    # a judge that never fails is asked once per item; its verdicts are the same
    steady = OutsideTransactions(LlmJudge.from_spec(f"fake-model@{fake_openai}"))
    plain = score_run(root_on(w.settings), "ahead", scorer_version="plain", bus=w.bus, topics=(w.sessions,),
                      scores_topic=w.scores, client=w.client, judge=steady, timeout_s=120)
    assert len(steady.asked) == len(set(steady.asked)) == 3 * 3
    verdicts = lambda r: {(s.trial, t.index, c.id): (c.passed, c.evidence)  # noqa: E731
                          for s in r.sessions for t in s.turns for c in t.checks}
    assert verdicts(plain) == verdicts(report)


def test_a_judge_needs_the_engine() -> None:
    with pytest.raises(ValueError, match="engine"):
        ScorerProjection(judge=LlmJudge("m", "http://127.0.0.1:9/v1"))


@pytest.mark.parametrize("batch_size", [500, 2])
def test_a_loaded_log_is_judged_ahead_when_its_recorded_state_arrives(
    scoring_world: World, fake_openai: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, batch_size: int
) -> None:
    """Elsewhere no sandbox exists: each session waits for its `rounds.sandbox.state`, in the batch of its end
    (500) or a later one (2); its verdicts are asked in that batch's prefetch, once per item."""
    w = scoring_world
    play_judged(w, "moved", ["oracle", "nothing"])
    judge = LlmJudge.from_spec(f"fake-model@{fake_openai}")
    here = score_run(root_on(w.settings), "moved", bus=w.bus, topics=(w.sessions,), scores_topic=w.scores,
                     client=w.client, judge=judge, timeout_s=120)
    archive = io.BytesIO()
    dump(w.bus, [w.sessions], archive)
    elsewhere = Settings(database_url=f"sqlite:///{tmp_path / 'elsewhere.sqlite'}")
    upgrade(elsewhere.database_url)
    bus = bus_on(elsewhere)
    bus.ensure_topics(topic_specs(3))
    spy = OutsideTransactions(judge)
    root = root_on(elsewhere)
    spy.watch(root.engine())  # the engine the re-score runs on: the process's
    monkeypatch.setattr(members, "ProjectionRunner",
                        lambda *a, **kw: ProjectionRunner(*a, **{**kw, "batch_size": batch_size}))
    try:
        load(bus, archive.getvalue().splitlines())
        with client_on(elsewhere) as empty:
            there = score_run(root, "moved", bus=bus, client=empty, judge=spy, timeout_s=120)
    finally:
        bus.close()
    assert set(spy.open_transactions) == {0}
    assert len(spy.asked) == len(set(spy.asked)) == 2 * 3
    checks = lambda r: sorted((s.trial, t.index, c.id, c.passed, c.evidence)  # noqa: E731
                              for s in r.sessions for t in s.turns for c in t.checks)
    assert checks(there) == checks(here) and there.judge == here.judge
