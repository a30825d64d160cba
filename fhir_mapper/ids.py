"""Official MIMIC-IV on FHIR resource ids: uuid5(uuid5(uuid5(NAMESPACE_OID, "MIMIC-IV"), Name), key).

`fhir_id` is on the hot path (several calls per source row), so it hashes with hashlib directly on
precomputed namespace bytes instead of going through `uuid.uuid5`; a test pins it to `uuid.uuid5`.
"""

from __future__ import annotations

import hashlib
import uuid
from functools import cache

ROOT = uuid.uuid5(uuid.NAMESPACE_OID, "MIMIC-IV")
BIDMC_NPI_KEY = "http://hl7.org/fhir/sid/us-npi/1194052720"


@cache
def namespace(name: str) -> bytes:
    """Bytes of ns(Name); names are the official ones (Patient, EncounterICU, SpecimenMicro, ...)."""
    return uuid.uuid5(ROOT, name).bytes


def fhir_id(name: str, key: str) -> str:
    """uuid5(ns(name), key) as text, equal to `str(uuid.uuid5(...))`."""
    digest = bytearray(hashlib.sha1(namespace(name) + key.encode()).digest()[:16])
    digest[6] = (digest[6] & 0x0F) | 0x50
    digest[8] = (digest[8] & 0x3F) | 0x80
    h = digest.hex()
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


@cache
def _cached_ref(resource_type: str, name: str, key: str) -> str:
    return f"{resource_type}/{fhir_id(name, key)}"


def ref(resource_type: str, name: str, key: str) -> dict[str, str]:
    """A Reference to a resource with a frequently repeated key (patients, encounters, stays)."""
    return {"reference": _cached_ref(resource_type, name, key)}


def ref_once(resource_type: str, name: str, key: str) -> dict[str, str]:
    """A Reference whose key is (nearly) unique per row: not cached, to keep memory flat."""
    return {"reference": f"{resource_type}/{fhir_id(name, key)}"}


def organization_id() -> str:
    return fhir_id("Organization", BIDMC_NPI_KEY)
