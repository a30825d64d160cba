"""Scorer v4's reading data (data/reading.json: rewrites, non-result spans, number classes, qualifiers,
rounding tolerance) and write alternatives (data/write_alternatives.json), loaded once."""

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
def compiled(group: str) -> tuple[tuple[re.Pattern[str], str], ...]:
    """The rewrites of one group ("units": on the lower-cased text, "case_sensitive": on the text as
    written), compiled in their order."""
    flags = re.IGNORECASE if group == "units" else 0
    return tuple((re.compile(pattern, flags), to) for pattern, to in reading()["rewrite"][group])


@cache
def span_patterns() -> tuple[tuple[str, re.Pattern[str]], ...]:
    """(kind, pattern) of every non-result span: dates, times, list markers, identifiers."""
    return tuple((kind, re.compile(pattern, re.MULTILINE)) for kind, patterns in reading()["spans"].items()
                 for pattern in patterns)
