"""Conversions of MIMIC CSV text into FHIR primitive values, matching what the official PostgreSQL
mapping emits (`CAST(x AS TIMESTAMPTZ)` rendered in America/New_York, numerics as written).

All functions take the raw CSV text ('' means NULL, as in the official load) and are cheap: offsets
are cached per calendar day, since they only change on the two DST days of a year.
"""

from __future__ import annotations

import re
from datetime import datetime
from functools import lru_cache
from zoneinfo import ZoneInfo

ZONE = ZoneInfo("America/New_York")
_SPACES = re.compile(r"\s+")
_NUMERIC = re.compile(r"^[0-9.]+$")


def _fmt_offset(dt: datetime) -> str:
    seconds = int(dt.utcoffset().total_seconds())
    sign = "-" if seconds < 0 else "+"
    seconds = abs(seconds)
    return f"{sign}{seconds // 3600:02d}:{seconds % 3600 // 60:02d}"


@lru_cache(maxsize=200_000)
def _day_offset(day: str) -> str | None:
    """The day's UTC offset, or None on a DST change day (then each time is resolved on its own)."""
    y, m, d = int(day[:4]), int(day[5:7]), int(day[8:10])
    first = _fmt_offset(datetime(y, m, d, 0, 0, tzinfo=ZONE))
    last = _fmt_offset(datetime(y, m, d, 23, 59, tzinfo=ZONE))
    return first if first == last else None


@lru_cache(maxsize=1 << 16)  # panels of labs share their charttime/storetime
def instant(text: str) -> str | None:
    """'2180-05-06 22:23:00[.ffffff]' or '2180-05-06' -> '2180-05-06T22:23:00-04:00'."""
    if not text:
        return None
    day = text[:10]
    clock = text[11:] if len(text) > 10 else "00:00:00"
    offset = _day_offset(day)
    if offset is None:
        offset = _fmt_offset(datetime.fromisoformat(f"{day} {clock}").replace(tzinfo=ZONE))
    return f"{day}T{clock}{offset}"


def date(text: str) -> str | None:
    """A date (or the date part of a datetime)."""
    return text[:10] if text else None


def number(text: str) -> int | float | None:
    """Numeric text as JSON number: integers stay integers ('140' -> 140, '1.5' -> 1.5)."""
    if not text:
        return None
    if "." in text or "e" in text or "E" in text or "n" in text or "N" in text:
        return float(text)
    return int(text)


def plain_number(text: str | None) -> int | float | None:
    """`CASE WHEN x ~ '^[0-9\\.]+$' THEN CAST(x AS DECIMAL)`: only plain unsigned decimals."""
    if not text or not _NUMERIC.match(text):
        return None
    try:
        return number(text)
    except ValueError:
        return None


def squash(text: str | None) -> str | None:
    """`TRIM(REGEXP_REPLACE(x, '\\s+', ' ', 'g'))`, with '' -> None."""
    if not text:
        return None
    return _SPACES.sub(" ", text).strip() or None


def strip(text: str | None) -> str | None:
    """`NULLIF(TRIM(x), '')`."""
    if not text:
        return None
    return text.strip() or None
