"""`rounds score` without --workers on Kafka: the member count is read from the log's end offsets through a
group-less reader (KafkaBus has no end_offsets of its own: the re-score crashed with AttributeError), and the
scores equal those of one member."""

from __future__ import annotations

import pytest

from services.consumers.scoring import members
from services.consumers.scoring.api import score_run
from tests.consumers.scoring import world
from tests.consumers.scoring.conftest import make_world
from tests.wiring import root_on

RUN = "run-kafka-auto"
pytestmark = pytest.mark.kafka


def _documents(report) -> dict[str, dict]:
    return {s.session: s.model_dump(exclude={"scorer_version"}) for s in report.sessions}


def test_rescore_on_kafka_without_workers_scores_like_one(sqlite_url: str, kafka_bootstrap: str) -> None:
    gen = make_world(sqlite_url, kafka_bootstrap)
    w = next(gen)
    try:
        sessions = 3
        for trial in range(sessions):
            session = w.session().start(w.scenario, RUN, trial=trial)
            world.play(session, w.scenario, "oracle")
            session.end("completed", run=RUN)
        reader = w.bus.reader([w.sessions])
        events = sum(reader.end_offsets(w.bus.partitions(w.sessions)).values())
        reader.close()
        assert events > sessions  # the log holds the sessions' events
        assert members.auto_workers(w.bus, (w.sessions,)) == 1  # a small log is scored in process
        auto = score_run(root_on(w.settings), RUN, scorer_version="auto", topics=(w.sessions,),
                         scores_topic=w.scores,
                         workers=None, timeout_s=240)
        one = score_run(root_on(w.settings), RUN, scorer_version="one", topics=(w.sessions,),
                        scores_topic=w.scores,
                        workers=1, timeout_s=240)
        assert auto.metrics.sessions == sessions
        assert _documents(auto) == _documents(one)
    finally:
        gen.close()
