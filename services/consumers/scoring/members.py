"""Members of a re-score's consumer group, in this process and in others.

A re-score is a fresh consumer group on the sessions topic; like any Kafka consumer group it scales by adding
members, each applying the partitions it is assigned (exactly once: the positions move in the batch's
transaction). `rounds score --workers N` runs one member here and N-1 in child processes
(`python -m services.consumers.scoring.members`, the spec on stdin), so a re-score uses the machine's cores
instead of one. Each member scores a batch's sessions before the batch's transaction opens (the projection's
prefetch), so on SQLite the members wait for each other only while writing. A member that dies is evicted
from the group and its partitions are applied by the others; the re-score ends when the group has applied
the log up to the end offsets seen at its start.
"""

from __future__ import annotations

import logging
import os
import pickle
import subprocess
import sys
import tempfile
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path

import httpx
from sqlalchemy import Engine

from events.bus import Bus
from events.projections.runner import ProjectionRunner
from rounds.db import make_engine
from rounds.settings import Settings
from services.consumers.scoring.fhir_state import StateReader, fhir_client
from services.consumers.scoring.projection import ScorerProjection
from services.consumers.scoring.scenarios import load_scenarios
from services.consumers.scoring.turn_parts import Judge

log = logging.getLogger(__name__)

EVENTS_PER_EXTRA_MEMBER = 20_000  # a child process costs ~2 s of imports: worth it past this many events


@dataclass(frozen=True)
class MemberSpec:
    """Everything a member in another process needs (picklable: settings keep their secrets)."""

    settings: Settings
    run_id: str
    scorer_version: str
    suffix: str
    scenarios: Path | None = None
    topics: tuple[str, ...] | None = None
    scores_topic: str | None = None
    timeout_s: float | None = 600

    @property
    def group_id(self) -> str:
        return f"scorer.rescore.{self.suffix}"


def make_projection(client: httpx.Client, engine: Engine | None = None, **kwargs) -> ScorerProjection:
    """The scorer projection reading sandboxes through `client` (and its buffer through `engine`): the live
    scorer's (`rounds consume scorer`) and every re-score member's."""
    return ScorerProjection(read_state=StateReader(client), engine=engine, **kwargs)


def projection_of(spec: MemberSpec, client: httpx.Client, engine: Engine, *, judge: Judge | None = None,
                  scenarios: dict | None = None) -> ScorerProjection:
    """The scorer projection of one member (every member of the group builds the same one)."""
    fresh = scenarios
    if fresh is None and spec.scenarios is not None:
        fresh = load_scenarios(spec.scenarios)
    extra = {"scores_topic": spec.scores_topic} if spec.scores_topic else {}
    return make_projection(client, engine, suffix=spec.suffix, topics=spec.topics, run_id=spec.run_id,
                           scorer_version=spec.scorer_version, scenarios=fresh, judge=judge, **extra)


def runner_of(spec: MemberSpec, bus: Bus, engine: Engine, projection: ScorerProjection) -> ProjectionRunner:
    return ProjectionRunner(bus, engine, projection, group_id=spec.group_id, batch_size=500,
                            poll_timeout_s=0.2, publish_dead_letters=False)


def auto_workers(bus: Bus, topics: tuple[str, ...]) -> int:
    """Members worth running for this log: one per partition of the topics, at most one more than the cores,
    and one more only per EVENTS_PER_EXTRA_MEMBER events to apply (a small run is scored in process)."""
    tps = [tp for topic in topics for tp in bus.partitions(topic)]
    events = sum(bus.end_offsets(tps).values()) if tps else 0
    return max(1, min(len(tps), (os.cpu_count() or 1) + 1, 1 + events // EVENTS_PER_EXTRA_MEMBER))


def spawn(spec: MemberSpec, count: int) -> list[subprocess.Popen]:
    """`count` members in child processes (their output is kept for the report of a failed member)."""
    children = []
    for _ in range(count):
        errors = tempfile.TemporaryFile()  # noqa: SIM115 - closed by reap(); a pipe could fill and block
        child = subprocess.Popen([sys.executable, "-m", "services.consumers.scoring.members"],
                                 stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=errors)
        child.stderr = errors  # type: ignore[assignment]  # read back by reap()
        assert child.stdin is not None
        child.stdin.write(pickle.dumps(spec))
        child.stdin.close()
        children.append(child)
    return children


def reap(children: list[subprocess.Popen], timeout_s: float = 60) -> list[str]:
    """Wait for the children; the errors of those that failed. Their partitions were applied by the group's
    other members (the group caught up), so a failed member costs time, never scores."""
    failures = []
    for child in children:
        try:
            child.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            child.kill()
            child.wait()
        if child.returncode != 0 and child.stderr is not None:
            child.stderr.seek(0)
            lines = child.stderr.read().decode(errors="replace").strip().splitlines()
            tail = "\n".join(lines[-6:])  # the exception, under its traceback's last frames
            failures.append(f"member pid {child.pid} exited {child.returncode}: {tail.strip()}")
        if child.stderr:
            child.stderr.close()
    for failure in failures:
        log.warning("re-score %s", failure)
    return failures


def run_member(spec: MemberSpec) -> None:
    """One member in this process, until the group has applied the log up to its end offsets."""
    from events.factory import open_bus

    with ExitStack() as stack:
        bus = open_bus(spec.settings)
        stack.callback(bus.close)
        engine = make_engine(spec.settings.database_url)
        stack.callback(engine.dispose)
        client = stack.enter_context(fhir_client(spec.settings))
        runner = runner_of(spec, bus, engine, projection_of(spec, client, engine))
        with runner:
            runner.run(until_caught_up=True, timeout_s=spec.timeout_s)


def main() -> None:
    # Run as __main__, this file's classes are not the ones the spec was pickled with: use the module's.
    from services.consumers.scoring import members

    logging.basicConfig(level=logging.WARNING)
    spec = pickle.loads(sys.stdin.buffer.read())
    if not isinstance(spec, members.MemberSpec):
        raise SystemExit("members: stdin holds no MemberSpec")
    members.run_member(spec)


if __name__ == "__main__":
    main()
