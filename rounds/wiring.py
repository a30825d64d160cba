"""What the composition root hands a command: `Wiring`, the process's settings and its one engine.

The `rounds` group's callback (rounds/cli.py) makes the process's root (rounds/root.py) once per invocation
and puts it on the click context; a command module, on a floor below the root, reads it back with
`wiring(ctx, database_url)` and passes what it needs to its components as arguments. Components never read
the settings, make an engine or migrate themselves. Ground floor: only the type and the lookup live here.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

import typer
from sqlalchemy import Engine

from rounds.settings import Settings


class Wiring(Protocol):
    """One process's wiring on one database."""

    settings: Settings
    engine_factory: Callable[[str], Engine]  # for a child process, which makes its own engine

    def engine(self) -> Engine:
        """The process's engine on `settings.database_url`, made once (the schema is not touched)."""
        ...

    def upgrade(self, revision: str = "head") -> Wiring:
        """Bring the schema to `revision` (`rounds db upgrade`; a command that must have the schema at head
        calls it before it hands the engine out): the one way a process migrates."""
        ...

    def bus(self, *, ensure_topics: bool = False) -> Any:
        """The process's event bus (events.bus.Bus, typed loosely here: the bus stands a floor higher): the
        SQL log on `engine()` or Kafka, made once."""
        ...

    def backbone(self) -> Any:
        """The FHIR API's event wiring (services.fhir_api.backbone.wiring.BackboneSettings, a floor higher),
        read once: whether an in-process FHIR app relays its outbox and records its exchanges."""
        ...

    def on(self, database_url: str | None = None, **changes: Any) -> Wiring:
        """The same process's wiring with a command's options over the settings (`--database-url` ...):
        another database is another engine, the same one is the same engine."""
        ...


def wiring(ctx: typer.Context, database_url: str | None = None, **changes: Any) -> Wiring:
    """The root's wiring for a command, with its options over the settings."""
    root = ctx.find_root().obj
    if root is None:
        raise RuntimeError("a command runs under the `rounds` group, which makes the process's wiring")
    return root.on(database_url, **changes)
