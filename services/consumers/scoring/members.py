"""Members of a re-score's consumer group, in this process and in others.

A re-score is a fresh consumer group on the sessions topic; like any Kafka consumer group it scales by adding
members, each applying the partitions it is assigned (exactly once: the positions move in the batch's
transaction). `rounds score --workers N` runs one member here and N-1 in child processes, so a re-score uses
the machine's cores instead of one: forked from this process when it runs no other thread (the modules it
imported, ~2-3 s of CPU a process, are then imported once), else started as `python -m
services.consumers.scoring.members` with the spec on stdin. Each member scores a batch's sessions before the
batch's transaction opens (the projection's prefetch), so on SQLite the members wait for each other only
while writing. A member that dies is evicted from the group and its partitions are applied by the others; the
re-score ends when the group has applied the log up to the end offsets seen at its start. A named group
(`rounds score --group NAME`) is joined from other machines by `rounds score --group NAME --join`: each such
member applies the partitions it is assigned (`run_member`) and leaves when the group is caught up; the
process started without --join finalizes and reports.
"""

from __future__ import annotations

import logging
import os
import pickle
import re
import subprocess
import sys
import tempfile
import threading
import time
import traceback
from collections.abc import Callable
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Protocol

from sqlalchemy import Engine, inspect, select
from sqlalchemy.exc import DBAPIError

from events.bus import Bus
from events.projections.runner import ProjectionRunner
from events.projections.tracking import POSITIONS
from rounds.settings import Settings
from services.consumers.scoring.fhir_state import Client, LazyClient, StateReader
from services.consumers.scoring.projection import ScorerProjection
from services.consumers.scoring.scenarios import load_scenarios
from services.consumers.scoring.turn_parts import Judge

log = logging.getLogger(__name__)

BATCH = 1_000  # events a member applies per transaction (fewer, larger: the members take turns writing)
RELAY_ROWS = 2_000  # score events a member appends to the log at once
EVENTS_PER_EXTRA_MEMBER = 20_000  # a child process costs ~2 s of imports: worth it past this many events
JOIN_WAIT_S = 600.0  # how long a member waits for the process starting its group to make the group's tables
JOIN_POLL_S = 0.5


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
    engine_factory: Callable[[str], Engine] | None = None  # the root's (foundation.db.make_engine)
    join_wait_s: float = JOIN_WAIT_S  # how long to wait for the group's tables (`await_group`)

    @property
    def group_id(self) -> str:
        return f"scorer.rescore.{self.suffix}"


def make_projection(client: Client, engine: Engine | None = None, **kwargs) -> ScorerProjection:
    """The scorer projection reading sandboxes through `client` (and its buffer through `engine`): the live
    scorer's (`rounds consume scorer`) and every re-score member's."""
    return ScorerProjection(read_state=StateReader(client), engine=engine, **kwargs)


def projection_of(spec: MemberSpec, client: Client, engine: Engine, *, judge: Judge | None = None,
                  scenarios: dict | None = None) -> ScorerProjection:
    """The scorer projection of one member (every member of the group builds the same one)."""
    fresh = scenarios
    if fresh is None and spec.scenarios is not None:
        fresh = load_scenarios(spec.scenarios)
    extra = {"scores_topic": spec.scores_topic} if spec.scores_topic else {}
    return make_projection(client, engine, suffix=spec.suffix, topics=spec.topics, run_id=spec.run_id,
                           scorer_version=spec.scorer_version, scenarios=fresh, judge=judge, **extra)


def runner_of(spec: MemberSpec, bus: Bus, engine: Engine, projection: ScorerProjection, *,
              make_tables: bool = True) -> ProjectionRunner:
    """A member's runner: batches of BATCH events, score events appended to the log RELAY_ROWS at a time
    (fewer, larger write transactions, which the members of a group on SQLite take in turns).
    `make_tables`: only the process that starts the group (api.py `score_run`) makes its tables."""
    return ProjectionRunner(bus, engine, projection, group_id=spec.group_id, batch_size=BATCH,
                            poll_timeout_s=0.2, publish_dead_letters=False,
                            relay_rows=RELAY_ROWS, make_tables=make_tables)


def await_group(engine: Engine, projection: ScorerProjection, group_id: str, timeout_s: float) -> bool:
    """Wait until the process that starts the group has made its buffer tables (a member started first, on
    another machine, waits for it): True once they exist, False when the group has already applied the log
    and its tables are gone (it recorded positions: a member come too late has nothing left to do);
    TimeoutError naming the group when neither happens in `timeout_s`. A member never makes the tables
    itself: two processes making one set of tables race on every CREATE."""
    names = [table.name for table in projection.tables.values()]
    deadline = time.monotonic() + timeout_s
    while not all(inspect(engine).has_table(name) for name in names):
        with engine.connect() as conn:
            if conn.execute(select(POSITIONS.c.group_id).where(POSITIONS.c.group_id == group_id).limit(1)
                            ).first() is not None:
                return False
        if time.monotonic() >= deadline:
            raise TimeoutError(f"re-score group {group_id}: its tables ({', '.join(names)}) did not appear "
                               f"in {timeout_s:g} s; start the group with `rounds score --group NAME` "
                               "(without --join), which makes them")
        time.sleep(JOIN_POLL_S)
    return True


def auto_workers(bus: Bus, topics: tuple[str, ...]) -> int:
    """Members worth running for this log: one per partition of the topics, at most one more than the cores,
    and one more only per EVENTS_PER_EXTRA_MEMBER events to apply (a small run is scored in process)."""
    tps = [tp for topic in topics for tp in bus.partitions(topic)]
    events = 0
    if tps:  # through a group-less reader: KafkaBus has no end_offsets of its own, every bus has a reader
        reader = bus.reader(topics)
        try:
            events = sum(reader.end_offsets(tps).values())
        finally:
            reader.close()
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


class Child(Protocol):
    """A member in a child process as `reap` waits for it (a subprocess.Popen, or a ForkedMember)."""

    pid: int
    returncode: int | None
    stderr: IO[bytes] | None

    def wait(self, timeout: float | None = None) -> int: ...

    def kill(self) -> None: ...


class ForkedMember:
    """A member forked from this process: waited for like a subprocess (its errors in a temporary file)."""

    def __init__(self, pid: int, stderr: IO[bytes]) -> None:
        self.pid, self.stderr = pid, stderr
        self.returncode: int | None = None

    def wait(self, timeout: float | None = None) -> int:
        deadline = None if timeout is None else time.monotonic() + timeout
        while self.returncode is None:
            pid, status = os.waitpid(self.pid, os.WNOHANG)
            if pid:
                self.returncode = os.waitstatus_to_exitcode(status)
            elif deadline is not None and time.monotonic() >= deadline:
                raise subprocess.TimeoutExpired(f"member pid {self.pid}", timeout or 0)
            else:
                time.sleep(0.05)
        return self.returncode

    def kill(self) -> None:
        if self.returncode is None:
            os.kill(self.pid, 9)


def fork(spec: MemberSpec, count: int) -> list[ForkedMember]:
    """`count` members forked from this process, which must run no other thread (a thread's locks would be
    held for ever in the child) and hold no transaction open. A child builds its own bus, engine and FHIR
    client (it never uses this process's connections) and leaves with os._exit: nothing of this process's
    is closed or flushed by it."""
    children = []
    for _ in range(count):
        errors = tempfile.TemporaryFile()  # noqa: SIM115 - closed by reap()
        pid = os.fork()
        if pid == 0:  # pragma: no cover - the child (its work is tested through the group's results)
            code = 1
            try:
                null = os.open(os.devnull, os.O_RDWR)
                os.dup2(null, 0)
                os.dup2(null, 1)  # this process's stdout is its caller's (a summary on the last line)
                os.dup2(errors.fileno(), 2)
                run_member(spec)
                code = 0
            except BaseException:  # noqa: BLE001 - reported through the exit code and the errors file
                traceback.print_exc()
            finally:
                sys.stderr.flush()
                os._exit(code)
        children.append(ForkedMember(pid, errors))
    return children


def start(spec: MemberSpec, count: int) -> list[Child]:
    """`count` members in child processes: forked when this process runs no other thread, else spawned."""
    if count <= 0:
        return []
    if hasattr(os, "fork") and threading.active_count() == 1:
        import services.fhir_api.app  # noqa: F401 - imported once here, not in each member that reads a sandbox

        if threading.active_count() == 1:
            return list(fork(spec, count))
    return list(spawn(spec, count))


def reap(children: list[Child], timeout_s: float = 60) -> list[str]:
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
        if spec.engine_factory is None:
            raise ValueError("a member in another process needs the root's engine factory in its spec")
        engine = spec.engine_factory(spec.settings.database_url)  # a child process: its own engine
        stack.callback(engine.dispose)
        bus = open_bus(spec.settings, engine)
        stack.callback(bus.close)
        client = stack.enter_context(LazyClient(spec.settings, engine))
        projection = projection_of(spec, client, engine)
        if not await_group(engine, projection, spec.group_id, spec.join_wait_s):
            log.warning("re-score group %s: the reporting process finished the log first", spec.group_id)
            return
        runner = runner_of(spec, bus, engine, projection, make_tables=False)
        try:
            with runner:
                runner.run(until_caught_up=True, timeout_s=spec.timeout_s)
        except DBAPIError:
            if not group_ended(engine, projection):
                raise
            log.warning("re-score group %s: the reporting process finished the log first", spec.group_id)


def group_ended(engine: Engine, projection: ScorerProjection) -> bool:
    """Whether the group's buffer tables are gone: the reporting process drops them once it has applied the
    log and reported, so a member still polling then (another machine's, started late or slow) finds its
    statements failing; that is the group's end, not the member's error (the batch it held rolled back and
    the reporting process had applied those events)."""
    return not inspect(engine).has_table(projection.tables["scoring_events"].name)


GROUP_NAME = re.compile(r"[A-Za-z0-9_]{1,40}")


def group_suffix(name: str) -> str:
    """The suffix of a named re-score group (its consumer group id and its buffer tables' names); ValueError
    for a name that cannot be part of a table name."""
    if not GROUP_NAME.fullmatch(name):
        raise ValueError(f"group name {name!r}: 1-40 letters, digits or _")
    return f"g_{name}"


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
