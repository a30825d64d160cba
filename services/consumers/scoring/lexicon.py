"""The scoring data files (data/*.json), loaded once: cue phrases, synonyms, units. Rules are data."""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path
from typing import Any

from contracts.vocabulary import resolve

DATA = Path(__file__).parent / "data"


@cache
def load(name: str) -> dict[str, Any]:
    """data/<name>.json, parsed once per process, with the clinical vocabulary's entries it names filled in
    (`@labs.creatinine.itemid`: a lab's codes are written once, in contracts/data/vocabulary.json)."""
    return resolve(json.loads((DATA / f"{name}.json").read_text(encoding="utf-8")))


def lexicon() -> dict[str, Any]:
    return load("lexicon")


def units() -> dict[str, Any]:
    return load("units")


def claims() -> dict[str, Any]:
    """Scorer v3's data (data/claims.json)."""
    return load("claims")


@cache
def synonym_index() -> dict[str, tuple[str, ...]]:
    """name (lower case) -> every name of its group."""
    index: dict[str, tuple[str, ...]] = {}
    for group in load("synonyms")["groups"]:
        names = tuple(dict.fromkeys(name.lower() for name in group))
        for name in names:
            index[name] = tuple(dict.fromkeys(index.get(name, ()) + names))
    return index


def expand_terms(terms: list[str]) -> list[str]:
    """The terms plus every synonym of each (longest first, so the longest name of an overlap is found)."""
    index = synonym_index()
    out: dict[str, None] = {}
    for term in terms:
        low = term.lower().strip()
        if low:
            out[low] = None
            out.update(dict.fromkeys(index.get(low, ())))
    return sorted(out, key=len, reverse=True)
