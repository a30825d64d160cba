"""Official MIMIC-IV on FHIR resource ids: uuid5(uuid5(uuid5(NAMESPACE_OID, "MIMIC-IV"), Name), key).

`fhir_id` is on the hot path (several calls per source row), so it hashes with hashlib directly on
precomputed namespace bytes instead of going through `uuid.uuid5`; a test pins it to `uuid.uuid5`.
"""

from __future__ import annotations

import hashlib
import uuid
from functools import cache, lru_cache

ROOT = uuid.uuid5(uuid.NAMESPACE_OID, "MIMIC-IV")
BIDMC_NPI_KEY = "http://hl7.org/fhir/sid/us-npi/1194052720"


@cache
def namespace(name: str) -> bytes:
    """Bytes of ns(Name); names are the official ones (Patient, EncounterICU, SpecimenMicro, ...)."""
    return uuid.uuid5(ROOT, name).bytes


_VARIANT = {c: "89ab"[int(c, 16) & 0x3] for c in "0123456789abcdef"}


_NAMESPACES: dict[str, bytes] = {}  # plain dict: cheaper per call than the functools cache
_sha1 = hashlib.sha1


def fhir_id(name: str, key: str) -> str:
    """uuid5(ns(name), key) as text, equal to `str(uuid.uuid5(...))`: version nibble 5, RFC 4122 variant."""
    ns = _NAMESPACES.get(name)
    if ns is None:
        ns = _NAMESPACES[name] = namespace(name)
    h = _sha1(ns + key.encode()).hexdigest()
    return f"{h[:8]}-{h[8:12]}-5{h[13:16]}-{_VARIANT[h[16]]}{h[17:20]}-{h[20:32]}"


@cache
def _cached_ref(resource_type: str, name: str, key: str) -> str:
    return f"{resource_type}/{fhir_id(name, key)}"


def ref(resource_type: str, name: str, key: str) -> dict[str, str]:
    """A Reference to a resource with a frequently repeated key (patients, encounters, stays)."""
    return {"reference": _cached_ref(resource_type, name, key)}


@lru_cache(maxsize=1 << 12)
def _recent_ref(resource_type: str, name: str, key: str) -> str:
    return f"{resource_type}/{fhir_id(name, key)}"


def ref_recent(resource_type: str, name: str, key: str) -> dict[str, str]:
    """A Reference whose key repeats in runs (an order's administrations, a stay's rows): a bounded cache
    of the most recent keys, so memory stays flat."""
    return {"reference": _recent_ref(resource_type, name, key)}


def ref_once(resource_type: str, name: str, key: str) -> dict[str, str]:
    """A Reference whose key is (nearly) unique per row: not cached, to keep memory flat."""
    return {"reference": f"{resource_type}/{fhir_id(name, key)}"}


def organization_id() -> str:
    return fhir_id("Organization", BIDMC_NPI_KEY)
