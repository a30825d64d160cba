"""Which relay may publish the pending outbox rows now: one at a time per database, on every dialect.

Two relays (one per process: `rounds serve`'s in-process relay beside `rounds run`'s) that read the same
pending rows both publish them. PostgreSQL claims rows with `FOR UPDATE SKIP LOCKED` inside the relay's
transaction. SQLite has no row locks, and holding its database write lock across a publish would deadlock the
embedded log, which writes to the same file through another connection. So on SQLite a relay claims the outbox
with an exclusive advisory lock on a file beside the database (`<db>-relay.lock`, as SQLite keeps `-wal` and
`-shm`): the next relay waits for the batch to be published *and marked*, then finds it sent. The operating
system drops the lock when its holder dies, so a crashed relay never blocks the others (its unmarked rows are
published again, with the same event ids, and consumers drop them).
"""

from __future__ import annotations

import fcntl
import os
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext
from functools import partial
from pathlib import Path

from sqlalchemy import Engine

_IN_MEMORY = {"", ":memory:"}


def lock_path(engine: Engine) -> Path | None:
    """The claim file of a file-backed SQLite database; None where the database claims rows itself."""
    if engine.dialect.name != "sqlite":
        return None
    database = engine.url.database or ""
    if database in _IN_MEMORY or database.startswith("file::memory:") or "mode=memory" in database:
        return None
    return Path(os.path.abspath(database)).with_name(Path(database).name + "-relay.lock")


@contextmanager
def file_claim(path: Path) -> Iterator[None]:
    """An exclusive `flock` on `path` for the length of the block. The lock belongs to the open file, so two
    relays block each other whether they are two processes or two threads of one."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # closing the descriptor releases the lock


Claim = Callable[[], AbstractContextManager[None]]


def claim_for(engine: Engine) -> Claim:
    """The claim a relay on `engine` holds while it publishes and marks one batch."""
    path = lock_path(engine)
    return partial(file_claim, path) if path is not None else nullcontext
