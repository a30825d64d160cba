"""Shared state of one generation run: the current patient's ids and seeded faker/random, the people pools."""

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


@dataclass(frozen=True)
class IdBlock:
    """One id sequence: its first value and how many ids each patient owns. Patient i owns
    [start + i*size, start + (i+1)*size), so its ids follow from its index alone and a shard can draw its
    own patients and skip the others' (docs/scale.md, Shards)."""

    start: int
    size: int


# MIMIC-like widths, above the ranges the real MIMIC-IV uses. A block covers the most a patient can draw
# (<= 4 admissions, one ICU stay each, <= 21 days of lab draws) or, where the count is open-ended, several
# times the largest one seen in 3,000 patients; a patient that outgrows one stops the run (IdBlockFull).
# At 300,000 patients every id stays below 2**31.
ID_BLOCKS = {
    "subject_id": IdBlock(20_000_000, 1),
    "hadm_id": IdBlock(30_000_000, 4),
    "icu_stay_id": IdBlock(40_000_000, 4),
    "ed_stay_id": IdBlock(48_000_000, 5),  # an ED visit before each admission and one not admitted
    "transfer_id": IdBlock(50_000_000, 32),  # <= 21: ED, 3 units and discharge per admission, and a visit
    "labevent_id": IdBlock(200_000_000, 4096),  # <= ~3,440 (most seen: 827)
    "specimen_id": IdBlock(100_000_000, 1024),  # <= ~810 (most seen: 171)
    "microevent_id": IdBlock(5_000_000, 512),  # most seen: 66
    "micro_specimen_id": IdBlock(20_000_000, 32),  # most seen: 8
    "pharmacy_id": IdBlock(100_000_000, 512),  # most seen: 42
    "orderid": IdBlock(20_000_000, 512),  # most seen: 45
}


class IdBlockFull(RuntimeError):
    """A patient drew more ids of one sequence than its block holds."""


def subject_id(index: int) -> int:
    """Patient `index`'s subject_id, known before anything of it is drawn (which shard it belongs to)."""
    block = ID_BLOCKS["subject_id"]
    return block.start + index * block.size


@dataclass
class Ids:
    """Patient `index`'s ids: the next unused id of its block of every sequence."""

    index: int
    used: dict[str, int] = field(default_factory=lambda: dict.fromkeys(ID_BLOCKS, 0))

    def new(self, name: str) -> int:
        block, taken = ID_BLOCKS[name], self.used[name]
        if taken >= block.size:
            raise IdBlockFull(f"patient {self.index} needs more than {block.size} {name}s: widen its block "
                              "in fhir_mapper/synth/context.py ID_BLOCKS (every later id moves)")
        self.used[name] = taken + 1
        return block.start + self.index * block.size + taken


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
    """Everything the table generators share. `start_patient(i)` reseeds faker and opens the id blocks of
    patient i alone: nothing carries from one patient to the next."""

    def __init__(self, out: TableSet, seed: int) -> None:
        self.out = out
        self.seed = seed
        self.cat: Catalog = catalog()
        self.ids = Ids(-1)
        self.fake = Faker("en_US")
        self.fake.seed_instance(f"rounds-synth:{seed}:pools")
        upper = string.ascii_uppercase + string.digits
        self.providers = sorted({"P" + self.fake.lexify("?????", letters=upper) for _ in range(400)})
        self.caregivers = sorted({self.fake.random_int(1000, 99999) for _ in range(600)})
        self.rng: random.Random = self.fake.random
        self.index = -1

    def start_patient(self, index: int) -> None:
        self.index = index
        self.ids = Ids(index)
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
        return self.rng.choice(self.providers)

    def caregiver(self) -> int:
        return self.rng.choice(self.caregivers)

    def minutes(self, low: float, high: float) -> timedelta:
        return timedelta(minutes=self.rng.uniform(low, high))


def trim(moment: datetime, to: str = "minute") -> datetime:
    """Drop seconds (MIMIC charts most times to the minute) or keep whole seconds."""
    if to == "minute":
        return moment.replace(second=0, microsecond=0)
    return moment.replace(microsecond=0)


def clamp(moment: datetime, low: datetime, high: datetime) -> datetime:
    return max(low, min(high, moment))
