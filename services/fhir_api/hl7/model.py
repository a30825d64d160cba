"""What one outbound HL7 v2 message says, before it is ER7: the data the builders (messages.py) read and
the stay's tap (stay.py) fills from a session's view at its clock."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Location:
    """A ward of the record (Location): PV1-3."""

    id: str
    name: str


@dataclass(frozen=True)
class Outbound:
    """One message to send: `key` names the fact (its control id comes from it), `known_us` is when the
    session's clock first shows it (the order messages are sent in), `trigger` the event (A01, A02, A03,
    A04, R01); the resources are the session's view of them at that clock."""

    key: str
    known_us: int
    trigger: str
    patient: dict
    encounter: dict | None
    occurred: str | None = None  # EVN-6 / the event's own time (FHIR dateTime)
    location: Location | None = None
    prior_location: Location | None = None  # PV1-6 of a transfer
    observation: dict | None = None
    specimen: dict | None = None

    def order(self) -> tuple:
        return (self.known_us, self.occurred or "", self.key)
