"""Shared state of one generation run: id counters, the seeded faker/random of the current patient, pools."""

from __future__ import annotations

import random
import string
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from faker import Faker

from fhir_mapper.synth.catalog import Catalog, catalog
from fhir_mapper.synth.tables import TableSet

# First value of every id sequence: MIMIC-like widths, above the ranges the real MIMIC-IV uses.
ID_STARTS = {
    "subject_id": 20_000_000,
    "hadm_id": 30_000_000,
    "icu_stay_id": 40_000_000,
    "ed_stay_id": 48_000_000,
    "transfer_id": 50_000_000,
    "labevent_id": 200_000_000,
    "specimen_id": 100_000_000,
    "microevent_id": 5_000_000,
    "micro_specimen_id": 20_000_000,
    "pharmacy_id": 100_000_000,
    "orderid": 20_000_000,
}


@dataclass
class Ids:
    """Global counters (ids unique across the run) — no state beyond one integer per sequence."""

    next: dict[str, int] = field(default_factory=lambda: dict(ID_STARTS))

    def new(self, name: str) -> int:
        value = self.next[name]
        self.next[name] = value + 1
        return value


@dataclass
class SubjectSeq:
    """Per-subject sequences of MIMIC ids built as `<subject_id>-<seq>` (poe, emar, notes)."""

    subject_id: int
    seqs: dict[str, int] = field(default_factory=dict)

    def new(self, name: str) -> int:
        value = self.seqs.get(name, 0) + 1
        self.seqs[name] = value
        return value


class SynthState:
    """Everything the table generators share. `start_patient(i)` reseeds faker for patient i alone."""

    def __init__(self, out: TableSet, seed: int) -> None:
        self.out = out
        self.seed = seed
        self.cat: Catalog = catalog()
        self.ids = Ids()
        self.fake = Faker("en_US")
        self.fake.seed_instance(f"rounds-synth:{seed}:pools")
        upper = string.ascii_uppercase + string.digits
        self.providers = sorted({"P" + self.fake.lexify("?????", letters=upper) for _ in range(400)})
        self.caregivers = sorted({self.fake.random_int(1000, 99999) for _ in range(600)})
        self.used_providers: set[str] = set()
        self.used_caregivers: set[int] = set()
        self.rng: random.Random = self.fake.random
        self.index = -1

    def start_patient(self, index: int) -> None:
        self.index = index
        self.fake.seed_instance(f"rounds-synth:{self.seed}:patient:{index}")
        self.rng = self.fake.random

    @contextmanager
    def stream(self, name: str) -> Iterator[None]:
        """Draw from a random stream of its own (per seed, patient and `name`), so that what one table
        generator draws never shifts another's values: adding realism to eMAR leaves the labs unchanged."""
        saved = self.rng
        self.rng = random.Random(f"rounds-synth:{self.seed}:patient:{self.index}:{name}")
        try:
            yield
        finally:
            self.rng = saved

    # -- draws -----------------------------------------------------------------------------------------
    def weighted(self, weights: dict[str, float]) -> str:
        keys = list(weights)
        return self.rng.choices(keys, weights=[weights[k] for k in keys])[0]

    def provider(self) -> str:
        pid = self.rng.choice(self.providers)
        self.used_providers.add(pid)
        return pid

    def caregiver(self) -> int:
        cid = self.rng.choice(self.caregivers)
        self.used_caregivers.add(cid)
        return cid

    def minutes(self, low: float, high: float) -> timedelta:
        return timedelta(minutes=self.rng.uniform(low, high))


def trim(moment: datetime, to: str = "minute") -> datetime:
    """Drop seconds (MIMIC charts most times to the minute) or keep whole seconds."""
    if to == "minute":
        return moment.replace(second=0, microsecond=0)
    return moment.replace(microsecond=0)


def clamp(moment: datetime, low: datetime, high: datetime) -> datetime:
    return max(low, min(high, moment))
