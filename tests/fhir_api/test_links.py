"""Query encoding of links (http/links.py encode_query) is byte-for-byte urllib's urlencode."""

from __future__ import annotations

import random
from urllib.parse import urlencode

from services.fhir_api.http.links import encode_query


def test_encode_query_equals_urlencode_on_every_kind_of_character() -> None:
    rng = random.Random(5)
    alphabet = [chr(i) for i in range(128)] + list("éü日本語😀\u2028")
    pairs = [
        ("code", "http://loinc.org|788-0"),
        ("date", "ge2150-01-01T00:00:00+02:00"),
        ("name:contains", "O'Brien & Söhne"),
        ("_sort", "-date,status"),
        ("empty", ""),
    ]
    for _ in range(300):
        pairs.append(
            ("".join(rng.choices(alphabet, k=4)), "".join(rng.choices(alphabet, k=rng.randint(0, 12))))
        )
    assert encode_query(pairs) == urlencode(pairs)
    assert encode_query([]) == ""
