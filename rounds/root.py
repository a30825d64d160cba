"""The composition root of one process: the settings read once, one engine per database, one bus and one FHIR
store on that engine, handed to every component as arguments; and the one place that migrates (`upgrade`:
`rounds db upgrade`, and the commands that must bring the schema to head first).

`rounds/cli.py` makes a `Root` when the `rounds` group is invoked and closes it when the command ends;
command modules read it back from the click context (rounds/wiring.py `wiring`); `served_app` is the root
of a `rounds serve` worker process; the demo and the Inspect task make their own.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from rounds.settings import Settings

if TYPE_CHECKING:
    from sqlalchemy import Engine


@dataclass
class _Made:
    """What a process made once, shared by every view of its root (keyed by database URL)."""

    engines: dict[str, Engine] = field(default_factory=dict)
    buses: dict[tuple[str, str], Any] = field(default_factory=dict)
    backbone: Any = None


class Root:
    """One process's wiring (rounds/wiring.py `Wiring`) on `settings.database_url`."""

    def __init__(self, settings: Settings, *, _made: _Made | None = None) -> None:
        from foundation.db import make_engine

        self.settings = settings
        self.engine_factory = make_engine  # for child processes, which make their own (picklable)
        self._made = _made or _Made()

    @classmethod
    def from_environment(cls, database_url: str | None = None, **changes: Any) -> Root:
        """The settings as the environment has them now, the options given (not None) over them."""
        return cls(Settings()).on(database_url, **changes)

    def on(self, database_url: str | None = None, **changes: Any) -> Root:
        updates = {key: value for key, value in {"database_url": database_url, **changes}.items()
                   if value is not None and value != ""}
        if not updates:
            return self
        return Root(self.settings.model_copy(update=updates), _made=self._made)

    def upgrade(self, revision: str = "head") -> Root:
        """Bring the schema at `settings.database_url` to `revision` (the one caller of rounds/migrate)."""
        from rounds.migrate import upgrade

        upgrade(self.settings.database_url, revision)
        return self

    def engine(self) -> Engine:
        url = self.settings.database_url
        if url not in self._made.engines:
            self._made.engines[url] = self.engine_factory(url)
        return self._made.engines[url]

    def bus(self, *, ensure_topics: bool = False) -> Any:
        from events.factory import open_bus

        key = (self.settings.bus, self.settings.database_url)
        if key not in self._made.buses:
            engine = self.engine() if self.settings.bus != "kafka" else None
            self._made.buses[key] = open_bus(self.settings, engine)
        bus = self._made.buses[key]
        if ensure_topics:
            from events.topics import topic_specs

            bus.ensure_topics(topic_specs(self.settings.kafka_partitions))
        return bus

    def backbone(self) -> Any:
        """The FHIR API's event wiring (services.fhir_api.backbone.wiring.BackboneSettings:
        ROUNDS_OUTBOX_RELAY, ROUNDS_RECORD_INTERACTIONS), read once, when a FHIR app is first wired here."""
        if self._made.backbone is None:
            from services.fhir_api.backbone.wiring import BackboneSettings

            self._made.backbone = BackboneSettings()
        return self._made.backbone

    def store(self, *, validate: bool = True) -> Any:
        """The FHIR store on the process's engine (services.fhir_api.store.ResourceStore)."""
        from services.fhir_api.store import open_store

        return open_store(self.engine(), validate=validate, query_timeout_ms=self.settings.query_timeout_ms)

    def close(self) -> None:
        """Close the buses and dispose of the engines this process made (at the end of its command)."""
        for bus in self._made.buses.values():
            bus.close()
        for engine in self._made.engines.values():
            engine.dispose()
        self._made.buses.clear()
        self._made.engines.clear()


def served_app() -> Any:
    """The root of a `rounds serve` worker (uvicorn's factory; each worker is its own process): the settings
    from the environment `rounds serve` set, one engine, the store, bus and event backbone all on it."""
    from foundation.gcpause import freeze_startup_heap
    from services.fhir_api.app import create_app
    from services.fhir_api.backbone.wiring import install_event_backbone
    from services.fhir_api.http.health import collector_check

    root = Root(Settings())  # `rounds serve` migrated once, before its workers started
    app = create_app(root.settings, root.store())
    install_event_backbone(app, root.settings, bus=root.bus(), backbone=root.backbone())  # outbox, EHR events
    freeze_startup_heap()  # last: everything built so far is long-lived
    app.state.health_checks["collector"] = collector_check
    return app
