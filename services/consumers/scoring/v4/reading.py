"""Scorer v4's reading data (data/reading.json: rewrites, non-result spans, number classes, qualifiers,
rounding tolerance, the clinical terms of lay words) and write alternatives (data/write_alternatives.json),
loaded once."""

from __future__ import annotations

import json
import re
from functools import cache
from pathlib import Path
from typing import Any

DATA = Path(__file__).with_name("data")


@cache
def reading() -> dict[str, Any]:
    return json.loads((DATA / "reading.json").read_text(encoding="utf-8"))


@cache
def write_alternatives() -> dict[str, Any]:
    return json.loads((DATA / "write_alternatives.json").read_text(encoding="utf-8"))


@cache
def compiled(group: str) -> tuple[re.Pattern[str], tuple[str, ...]]:
    """The rewrites of one group ("units": case-insensitive, "case_sensitive": as written) as ONE pattern
    of numbered alternatives (one pass over the answer) and what each alternative becomes."""
    flags = re.IGNORECASE if group == "units" else 0
    rows = reading()["rewrite"][group]
    first = reading()["rewrite"]["first"][group]
    alternatives = "|".join(f"(?P<r{i}>{p})" for i, (p, _) in enumerate(rows))
    pattern = re.compile(f"{first}(?:{alternatives})", flags)
    return pattern, tuple(to for _, to in rows)


@cache
def span_patterns() -> tuple[tuple[str, re.Pattern[str]], ...]:
    """(kind, pattern) of every non-result span: dates, times, list markers, identifiers."""
    return tuple((kind, re.compile(pattern, re.MULTILINE)) for kind, patterns in reading()["spans"].items()
                 for pattern in patterns)


def with_clinical_terms(topics: list[str]) -> list[str]:
    """A patient's topic words and the clinical terms that say the same (`topic_terms`: "tired" ->
    "fatigue"), so an answer in a clinician's words uses what the patient said in lay ones."""
    terms = reading()["topic_terms"]
    return list(dict.fromkeys([*topics, *(t for topic in topics for t in terms.get(topic.lower(), []))]))
