"""The event catalog: each event type's payload model per schema version, its topic and key, its upcasters.

Each payload class declares the type it is the data of (`TYPE`, e.g. `SessionEnded.TYPE`; a message's type is
its sender's, `Communication.event_type`), and the catalog is built from the classes: `make_event(payload,
source=..., subject=...)` infers the type, so no producer spells a type string.

Upgrade rule (docs/events/README.md): an additive change (new optional field) keeps the version; a breaking
change adds version N+1 and registers an upcaster N -> N+1 (a pure function on the JSON `data`). Old events
are never rewritten in the log: `decode` upcasts them on read, so consumers always see the current version.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from pydantic import BaseModel, ValidationError

from events import payloads as p
from events.envelope import CloudEvent, EventError, InvalidEvent, utc_now
from events.payloads.messages import FULL_CHECK as FULL_FHIR_CHECK
from events.topics import DEADLETTER, FHIR_CHANGES, SCORES, SESSIONS

SCHEMA_BASE = "https://rounds.dev/schemas/events"
_SCHEMA_URI = re.compile(rf"^{re.escape(SCHEMA_BASE)}/(?P<type>[a-z0-9.-]+)/v(?P<version>[0-9]+)\.json$")

Upcaster = Callable[[dict[str, Any]], dict[str, Any]]


class UnknownEventType(InvalidEvent):
    """The event's `type` is not in the catalog."""


@dataclass(frozen=True)
class EventSpec:
    """One event type. `versions[v]` is the payload model of schema version v; the highest is current."""

    type: str
    versions: dict[int, type[BaseModel]]
    topic: str
    # Key within the topic: the session id (subject) unless the type says otherwise.
    key: Callable[[CloudEvent], str] = lambda event: event.subject or ""
    upcasters: dict[int, Upcaster] = field(default_factory=dict)  # v -> v+1
    check: Callable[[Any], None] | None = None  # extra rule on the validated payload
    requires_subject: bool = True

    @cached_property
    def version(self) -> int:
        return max(self.versions)

    @property
    def model(self) -> type[BaseModel]:
        return self.versions[self.version]

    @cached_property
    def validators(self) -> dict[int, Callable[[Any], BaseModel]]:
        """Per version, the payload model's validator itself: what `model_validate(data)` runs, without its
        Python wrapper (looked up once, not per event)."""
        return {v: model.__pydantic_validator__.validate_python for v, model in self.versions.items()}

    def schema_uri(self, version: int | None = None) -> str:
        return f"{SCHEMA_BASE}/{self.type}/v{version or self.version}.json"


class Catalog:
    """Registry type -> EventSpec; builds, validates and upcasts events."""

    def __init__(self, specs: Iterable[EventSpec] = ()) -> None:
        self._specs: dict[str, EventSpec] = {}
        # dataschema URI -> (type, version) of URIs already found valid: one dict lookup instead of a regex
        # per event read (bounded by the registered types x versions).
        self._schema_versions: dict[str, tuple[str, int]] = {}
        for spec in specs:
            self.register(spec)

    def register(self, spec: EventSpec) -> None:
        missing = [v for v in range(min(spec.versions), spec.version) if v not in spec.upcasters]
        if missing:
            raise ValueError(f"{spec.type}: old versions {missing} have no upcaster to the next version")
        self._specs[spec.type] = spec
        self._schema_versions.clear()

    def __iter__(self):
        return iter(self._specs.values())

    def spec(self, type_: str) -> EventSpec:
        try:
            return self._specs[type_]
        except KeyError:
            raise UnknownEventType(f"unknown event type {type_!r} (not in the catalog)") from None

    # -- producing -----------------------------------------------------------------------------------------
    def make(
        self,
        type_or_payload: str | BaseModel,
        data: BaseModel | dict[str, Any] | None = None,
        *,
        source: str,
        subject: str | None = None,
        id: str | None = None,
        sequence: int | None = None,
        correlationid: str | None = None,
        causationid: str | None = None,
        time: str | None = None,
    ) -> CloudEvent:
        """A validated CloudEvent with the current schema version (fresh uuid id, time now).

        `make(payload, ...)` sends the payload as the type its class declares (`type_of`); `make(type_, data,
        ...)` names the type, for a payload of several types (a FHIR change) or raw JSON `data`.
        """
        if isinstance(type_or_payload, str):
            if data is None:
                raise TypeError(f"make({type_or_payload!r}) needs the event's data")
            type_ = type_or_payload
        else:
            type_, data = type_of(type_or_payload), type_or_payload
        spec = self.spec(type_)
        raw = data.to_data() if hasattr(data, "to_data") else data
        event = CloudEvent.build(
            id=id or uuid.uuid4().hex,
            source=source,
            type=type_,
            time=time or utc_now(),
            subject=subject,
            dataschema=spec.schema_uri(),
            sequence=sequence,
            correlationid=correlationid,
            causationid=causationid,
            data=raw,
        )
        if type(data) is spec.model:  # already a validated payload: only the type's own rules remain
            self._check_subject(spec, event)
            self._check(spec, event, data)
            event.mark_checked(self)
            event.keep_payload(data)
        else:
            self.validate(event)
        return event

    def route(self, event: CloudEvent) -> tuple[str, str]:
        """(topic, key) for an event: sessions by session id, FHIR changes by session, else "Type/id"."""
        spec = self.spec(event.type)
        return spec.topic, spec.key(event)

    # -- checking and reading ------------------------------------------------------------------------------
    def version_of(self, event: CloudEvent) -> int:
        return self._version(self.spec(event.type), event)

    def _version(self, spec: EventSpec, event: CloudEvent) -> int:
        known = self._schema_versions.get(event.dataschema)
        if known is not None and known[0] == event.type:
            return known[1]
        if event.dataschema is None:
            raise InvalidEvent(
                f"{event.type} id={event.id}: dataschema is required (e.g. {spec.schema_uri()})"
            )
        match = _SCHEMA_URI.match(event.dataschema)
        if not match or match["type"] != event.type:
            raise InvalidEvent(
                f"{event.type} id={event.id}: dataschema {event.dataschema!r} is not {spec.schema_uri()}"
            )
        version = int(match["version"])
        if version not in spec.versions:
            raise InvalidEvent(f"{event.type} id={event.id}: unknown schema version v{version}")
        self._schema_versions[event.dataschema] = (event.type, version)
        return version

    def payload(self, event: CloudEvent) -> BaseModel:
        """The typed payload of an event of the *current* version (raises InvalidEvent): the one validated
        when the event was decoded or made (kept on it), else validated now."""
        spec = self.spec(event.type)
        kept = event.kept_payload
        if kept is not None and type(kept) is spec.model:
            return kept
        return self._validate_data(spec, self._version(spec, event), event)

    def validate(self, event: CloudEvent, *, allow_old: bool = False) -> None:
        """Publish-time check: known type, current dataschema, subject rule, payload valid.

        `allow_old` accepts a registered older version that upcasts cleanly (re-publishing an exported log).
        """
        spec = self.spec(event.type)
        self._check_subject(spec, event)
        version = self._version(spec, event)
        if version != spec.version and not allow_old:
            raise InvalidEvent(f"{event.type}: publish the current schema v{spec.version}, not v{version}")
        self._upgrade(spec, version, event)
        if version == spec.version:
            event.mark_checked(self)  # events are immutable: publishing it again needs no second check

    def is_valid(self, event: CloudEvent) -> bool:
        """True when this catalog already validated `event` (as made by `make` or checked by `validate`)."""
        return event.checked_by is self

    def upgrade(self, event: CloudEvent) -> CloudEvent:
        """The event with its data upcast to the current schema version (unchanged if already current)."""
        spec = self.spec(event.type)
        return self._upgrade(spec, self._version(spec, event), event)

    def _upgrade(self, spec: EventSpec, version: int, event: CloudEvent) -> CloudEvent:
        """The event at the current version, its payload validated and kept on it (`payload` reuses it)."""
        if version == spec.version:
            event.keep_payload(self._validate_data(spec, version, event))
            return event
        data = event.data
        for v in range(version, spec.version):
            try:
                data = spec.upcasters[v](data)
            except Exception as exc:  # noqa: BLE001 - a malformed old payload: a bad event, not a crash
                raise InvalidEvent(
                    f"{event.type} id={event.id}: cannot upcast data from v{v} to v{v + 1}: {exc!r}"
                ) from exc
        upgraded = event.model_copy(update={"data": data, "dataschema": spec.schema_uri()})
        upgraded.keep_payload(self._validate_data(spec, spec.version, upgraded))
        return upgraded

    def decode(self, raw: bytes) -> CloudEvent | None:
        """Bytes from the log -> current-version event, or None when they are not a valid catalogued event.
        The log's events were validated in full when published: a message's R4B Communication model is not
        run again here (its Rounds subset is)."""
        token = FULL_FHIR_CHECK.set(False)
        try:
            return self.upgrade(CloudEvent.from_bytes(raw))
        except EventError:
            return None
        finally:
            FULL_FHIR_CHECK.reset(token)

    def _validate_data(self, spec: EventSpec, version: int, event: CloudEvent) -> BaseModel:
        try:
            model = spec.validators[version](event.data)
        except ValidationError as exc:
            problems = "; ".join(
                f"{'.'.join(str(x) for x in e['loc']) or 'data'}: {e['msg']}" for e in exc.errors()
            )
            raise InvalidEvent(f"{event.type} id={event.id}: invalid data: {problems}") from None
        if spec.check is not None:  # most types have no rule of their own: no call
            self._check(spec, event, model)
        return model

    @staticmethod
    def _check_subject(spec: EventSpec, event: CloudEvent) -> None:
        if spec.requires_subject and not event.subject:
            raise InvalidEvent(f"{event.type} id={event.id}: subject (the session id) is required")

    @staticmethod
    def _check(spec: EventSpec, event: CloudEvent, model: BaseModel) -> None:
        if spec.check is not None:
            try:
                spec.check(model)
            except ValueError as exc:
                raise InvalidEvent(f"{event.type} id={event.id}: {exc}") from None


def type_of(payload: BaseModel) -> str:
    """The event type a payload is the data of: a message's sender's, else the one its class declares."""
    declared = getattr(payload, "event_type", None) or getattr(type(payload), "TYPE", "")
    if not declared:
        raise UnknownEventType(
            f"{type(payload).__name__} is the data of no single event type: name it (e.g. "
            "make_event(FhirResourceChange.TYPES[action], data, ...))"
        )
    return declared


def _sent_by(role: str) -> Callable[[p.Communication], None]:
    type_ = p.MESSAGE_TYPES[role]

    def check(message: p.Communication) -> None:
        if message.sender_role != role:
            raise ValueError(f"a {type_} must be sent by the {role}, not {message.sender_role}")

    return check


def _resource_key(event: CloudEvent) -> str:
    """A session's changes keyed by the session (its writes stay in order behind its Subscription's, on one
    partition); the shared record's by `Type/id`."""
    if event.subject:
        return event.subject
    data = event.data or {}
    return f"{data.get('resourceType')}/{data.get('id')}"


def _dead_letter_key(event: CloudEvent) -> str:
    return str((event.data or {}).get("key", ""))


def _spec(model: type[BaseModel], topic: str = SESSIONS, *, type_: str = "", **kw: Any) -> EventSpec:
    """The spec of a one-version type: the type its payload class declares unless `type_` names one."""
    return EventSpec(type=type_ or model.TYPE, versions={1: model}, topic=topic, **kw)


CATALOG = Catalog(
    [
        _spec(p.SessionStarted),
        EventSpec(
            type=p.SessionEnded.TYPE,
            versions={1: p.SessionEndedV1, 2: p.SessionEnded},
            topic=SESSIONS,
            upcasters={1: p.session_ended_v1_to_v2},
        ),
        *(
            _spec(p.Communication, type_=type_, check=_sent_by(role))
            for role, type_ in p.Communication.TYPES.items()
        ),
        _spec(p.EhrRequest),
        _spec(p.EhrResponse),
        _spec(p.ToolCall),
        _spec(p.ToolResult),
        _spec(p.ModelCall),
        _spec(p.CdsExchange),
        _spec(p.SandboxState),
        _spec(p.ScoreTurn, topic=SCORES),
        _spec(p.ScoreSession, topic=SCORES),
        _spec(p.JudgeCall, topic=SCORES),
        *(
            _spec(
                p.FhirResourceChange,
                topic=FHIR_CHANGES,
                type_=type_,
                key=_resource_key,
                requires_subject=False,
            )
            for type_ in p.FhirResourceChange.TYPES.values()
        ),
        # keyed by the session (the default): one session's feed is totally ordered
        _spec(p.FhirResourceKnown, topic=FHIR_CHANGES),
        _spec(p.DeadLetter, topic=DEADLETTER, key=_dead_letter_key, requires_subject=False),
    ]
)

make_event = CATALOG.make
decode = CATALOG.decode
route = CATALOG.route
