"""`--shard i/n`: which patients one of n machines (or processes) handles, by a stable hash of the patient.

Every stage that splits (`rounds map`, `rounds load`, `rounds scenarios build`) partitions the same way: a
patient belongs to shard `hash(Patient id) mod n`, where the Patient id is the MIMIC-IV on FHIR id, itself a
pure function of `subject_id` (fhir_mapper/ids.py), so the mapper, which sees subject_ids, and the loader and
the scenario builder, which see Patient ids, put every patient in the same shard. The hash is blake2b, not
Python's `hash()` (salted per process): two machines must agree. What belongs to no patient (the record's
directory: Medication, Organization, Location, ...) is every shard's, and the stages that write it are
idempotent (the loader skips what is stored), so the shards' union is the single-process result.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from hashlib import blake2b


@dataclass(frozen=True)
class Shard:
    """Shard `index` of `count` (0 <= index < count)."""

    index: int
    count: int

    def __post_init__(self) -> None:
        if self.count < 1 or not 0 <= self.index < self.count:
            raise ValueError(f"shard {self.index}/{self.count}: need 0 <= i < n and n >= 1")

    def holds(self, patient_id: str | None) -> bool:
        """Whether this shard handles the patient (None: no patient, every shard's)."""
        return patient_id is None or self.count == 1 or shard_number(patient_id, self.count) == self.index

    def __str__(self) -> str:
        return f"{self.index}/{self.count}"


ALL = Shard(0, 1)


def parse(text: str | None) -> Shard:
    """`i/n` -> Shard (None or '' -> the whole record); ValueError with the reason otherwise."""
    if not text:
        return ALL
    index, sep, count = text.partition("/")
    if not sep or not index.strip().isdigit() or not count.strip().isdigit():
        raise ValueError(f"'{text}' is not i/n (e.g. 0/2: the first of two shards)")
    return Shard(int(index), int(count))


@lru_cache(maxsize=1 << 16)
def shard_number(patient_id: str, count: int) -> int:
    digest = blake2b(patient_id.encode(), digest_size=8, person=b"rounds-shard").digest()
    return int.from_bytes(digest, "big") % count
