"""The stay as HL7 v2 events, read from a session's view at its clock: which ADT and ORU messages the record
says have happened by then, and the tap that sends those that are new as `rounds feed` moves the clock.

What counts as happened is the store's as-of rule and nothing else (services/fhir_api/store/known_time.json):
the session's searches answer the Encounter once its admission is known, with only the locations already
entered and without its end until discharge, and a lab once it was issued. So a message is never sent
before its fact was known, and a fact is sent once per key: A04/A01 when the hospital Encounter appears (A04
when its first location, the ED, was entered before the admission), A02 per location entered after it,
A03 when its end shows, R01 per lab Observation version.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace

import orjson

from services.fhir_api.hl7.er7 import tables
from services.fhir_api.hl7.messages import build
from services.fhir_api.hl7.model import Location, Outbound
from services.fhir_api.store.cursor import pages
from services.fhir_api.store.interface import Context, NotFound, ResourceStore
from services.fhir_api.store.known_time import clinical_time, known_from

Send = Callable[[str, str], None]  # (control id, ER7 text): a sink's send; raises when it cannot deliver


def _ref_id(node: dict | None, rtype: str) -> str | None:
    ref = (node or {}).get("reference", "")
    return ref.removeprefix(f"{rtype}/") if ref.startswith(f"{rtype}/") else None


@dataclass
class StayReader:
    """Reads one patient's stay through a session's view (`ctx`), caching the untimed directory (wards)."""

    store: ResourceStore
    patient_id: str
    locations: dict[str, Location] = field(default_factory=dict)

    def _read(self, ctx: Context, rtype: str, rid: str) -> dict | None:
        try:
            return orjson.loads(self.store.read(ctx, rtype, rid).raw)
        except NotFound:
            return None

    def location(self, ctx: Context, node: dict) -> Location | None:
        rid = _ref_id(node.get("location"), "Location")
        if rid is None:
            return None
        if rid not in self.locations:
            found = self._read(ctx, "Location", rid) or {}
            self.locations[rid] = Location(rid, found.get("name", ""))
        return self.locations[rid]

    def _search(self, ctx: Context, rtype: str, params: list[tuple[str, str]]) -> Iterable[dict]:
        for page in pages(self.store, ctx, rtype, params):
            for stored in page:
                yield orjson.loads(stored.raw)

    def events(self, ctx: Context) -> list[Outbound]:
        """Every ADT and ORU event of the patient the session's view shows at its clock."""
        patient = self._read(ctx, "Patient", self.patient_id)
        if patient is None:
            raise NotFound(f"Patient/{self.patient_id}")
        encounters: dict[str, dict] = {}
        found: list[Outbound] = []
        profiles = tables()["adt_profiles"]
        for encounter in self._search(ctx, "Encounter", [("patient", f"Patient/{self.patient_id}")]):
            encounters[encounter["id"]] = encounter
            profile = next(iter((encounter.get("meta") or {}).get("profile") or ()), "")
            if profiles.get(profile, {}).get("drives"):
                found.extend(self._adt(ctx, patient, encounter))
        params = [("patient", f"Patient/{self.patient_id}"), ("category", "laboratory")]
        for obs in self._search(ctx, "Observation", params):
            encounter = encounters.get(_ref_id(obs.get("encounter"), "Encounter") or "")
            version = (obs.get("meta") or {}).get("versionId", "1")
            known = clinical_time(obs)
            if known is None:
                continue
            found.append(Outbound(f"R01/{obs['id']}/{version}", known, "R01", patient, encounter,
                                  occurred=obs.get("issued"), observation=obs))
        return sorted(found, key=Outbound.order)

    def _adt(self, ctx: Context, patient: dict, encounter: dict) -> list[Outbound]:
        period = encounter.get("period") or {}
        admitted = known_from(period.get("start"))
        if admitted is None:
            return []
        eid = encounter["id"]
        entered = [(known_from((node.get("period") or {}).get("start")), node)
                   for node in encounter.get("location") or ()]
        before = [(at, node) for at, node in entered if at is not None and at < admitted]
        after = [(at, node) for at, node in entered if at is not None and at >= admitted]
        out: list[Outbound] = []
        current = self.location(ctx, before[-1][1]) if before else None
        if before:
            out.append(Outbound(f"A04/{eid}", admitted, "A04", patient, encounter,
                                occurred=before[0][1]["period"]["start"],
                                location=self.location(ctx, before[0][1])))
        out.append(Outbound(f"A01/{eid}", admitted, "A01", patient, encounter, occurred=period["start"],
                            location=current))
        for index, (at, node) in enumerate(after):
            here = self.location(ctx, node)
            out.append(Outbound(f"A02/{eid}/{index}", at, "A02", patient, encounter,
                                occurred=node["period"]["start"], location=here, prior_location=current))
            current = here
        ended = known_from(period.get("end"))
        if ended is not None:
            out.append(Outbound(f"A03/{eid}", ended, "A03", patient, encounter, occurred=period["end"],
                                location=current))
        return out

    def with_specimen(self, ctx: Context, event: Outbound) -> Outbound:
        """The event with its lab's Specimen (OBR-3's accession), read only for what is about to be sent."""
        rid = _ref_id((event.observation or {}).get("specimen"), "Specimen")
        if rid is None:
            return event
        return replace(event, specimen=self._read(ctx, "Specimen", rid))


@dataclass
class Hl7Tap:
    """Sends, as the clock moves, the messages of one patient's stay that became known since the last move:
    each once per key (its control id stable across runs), in the order they became known; a message is
    counted sent only when the sink took it (an MLLP receiver ACKed it)."""

    reader: StayReader
    stream: str
    send: Send
    seen: set[str] = field(default_factory=set)
    sent: int = 0

    def prime(self, ctx: Context) -> None:
        """What the session already shows at the feed's start was the past: not sent."""
        self.seen.update(event.key for event in self.reader.events(ctx))

    def tick(self, ctx: Context) -> int:
        new = [event for event in self.reader.events(ctx) if event.key not in self.seen]
        for event in new:
            self.send(*build(self.stream, self.reader.with_specimen(ctx, event)))
            self.seen.add(event.key)
            self.sent += 1
        return len(new)
