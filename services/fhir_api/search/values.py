"""Parsing FHIR values into index form: date/time ranges (µs since epoch), normalized strings, references.

Shared by indexing (what a resource holds) and searching (what a client asks), so both sides agree.
"""

from __future__ import annotations

import calendar
import re
import unicodedata
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal, InvalidOperation
from functools import lru_cache

MIN_US = -(2**62)  # open lower bound (Period without start)
MAX_US = 2**62  # open upper bound (Period without end)
TEXT_MAX = 255

_DATE = re.compile(
    r"^(?P<y>\d{4})(?:-(?P<m>\d{2})(?:-(?P<d>\d{2})(?:T(?P<H>\d{2}):(?P<M>\d{2})(?::(?P<S>\d{2})(?:\.(?P<f>\d{1,9}))?)?"
    r"(?P<tz>Z|[+-]\d{2}:\d{2})?)?)?)?$"
)
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def to_us(moment: datetime) -> int:
    """Microseconds since the epoch; naive datetimes are taken as UTC."""
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return (moment - _EPOCH) // timedelta(microseconds=1)


def from_us(us: int) -> datetime:
    """`to_us` reversed (UTC), clamped to what datetime can hold (index bounds run to ±2^62 µs)."""
    try:
        return _EPOCH + timedelta(microseconds=us)
    except OverflowError:
        return datetime.min.replace(tzinfo=UTC) if us < 0 else datetime.max.replace(tzinfo=UTC)


@lru_cache(maxsize=65536)
def date_range(text: str) -> tuple[int, int] | None:
    """The [low, high) range (µs) a FHIR date/dateTime/instant covers by its precision; None if malformed.

    Times without a zone are read as UTC (the server's zone). The full-second 'YYYY-MM-DDThh:mm:ss±hh:mm'
    form most clinical timestamps take is computed directly (no regex, no datetime arithmetic: the bulk load
    meets it several times per resource); `date_range_by_pattern` reads every form and is the reference.
    """
    if (
        type(text) is str
        and len(text) == 25
        and text[19] in "+-"
        and text[:19].translate(_DIGITS) == "9999-99-99T99:99:99"
        and text[20:].translate(_DIGITS) == "99:99"
        and 1 < (year := int(text[:4])) < 9999  # near the ends of datetime's range the pattern may overflow
    ):
        return _instant_range(text, year)
    return date_range_by_pattern(text)


_DIGITS = str.maketrans("0123456789", "9999999999")  # ASCII digits only, as in the pattern
_EPOCH_DAY = date(1970, 1, 1).toordinal()


def _instant_range(text: str, year: int) -> tuple[int, int] | None:
    hour, minute, second = int(text[11:13]), int(text[14:16]), int(text[17:19])
    try:
        day = date(year, int(text[5:7]), int(text[8:10])).toordinal() - _EPOCH_DAY
    except ValueError:
        return None
    if hour > 23 or minute > 59 or second > 59:
        return None
    offset = int(text[20:22]) * 3600 + int(text[23:25]) * 60
    low = (
        day * 86400 + hour * 3600 + minute * 60 + second - (offset if text[19] == "+" else -offset)
    ) * 10**6
    return low, low + 10**6


def date_range_by_pattern(text: str) -> tuple[int, int] | None:
    """`date_range` of any form, by the FHIR date pattern and datetime arithmetic."""
    m = _DATE.match(text.strip()) if isinstance(text, str) else None
    if not m:
        return None
    g = m.groupdict()
    try:
        year, month, day = int(g["y"]), int(g["m"] or 1), int(g["d"] or 1)
        start = datetime(
            year,
            month,
            day,
            int(g["H"] or 0),
            int(g["M"] or 0),
            int(g["S"] or 0),
            int((g["f"] or "0")[:6].ljust(6, "0")),
            tzinfo=UTC,
        )
    except ValueError:
        return None
    if g["tz"] and g["tz"] != "Z":
        sign = 1 if g["tz"][0] == "+" else -1
        start -= sign * timedelta(hours=int(g["tz"][1:3]), minutes=int(g["tz"][4:6]))
    if g["m"] is None:
        end = start.replace(year=year + 1)
    elif g["d"] is None:
        end = start + timedelta(days=calendar.monthrange(year, month)[1])
    elif g["H"] is None:
        end = start + timedelta(days=1)
    elif g["S"] is None:
        end = start + timedelta(minutes=1)
    elif g["f"] is None:
        end = start + timedelta(seconds=1)
    else:
        end = start + timedelta(microseconds=max(1, 10 ** (6 - min(len(g["f"]), 6))))
    return to_us(start), to_us(end)


def period_range(period: dict) -> tuple[int, int] | None:
    low = date_range(period["start"])[0] if date_range(period.get("start") or "") else MIN_US
    high = date_range(period["end"])[1] if date_range(period.get("end") or "") else MAX_US
    return None if low == MIN_US and high == MAX_US else (low, high)


@lru_cache(maxsize=65536)
def normalize(text: str) -> str:
    """Lowercase with accents stripped: FHIR's default string matching is case- and accent-insensitive."""
    if text.isascii():
        return text.lower()[:TEXT_MAX]
    decomposed = unicodedata.normalize("NFKD", text)
    return "".join(c for c in decomposed if not unicodedata.combining(c)).lower()[:TEXT_MAX]


def decimal_range(text: str) -> tuple[float, float, float] | None:
    """(value, low, high) with FHIR's implicit precision: '100' covers [99.5, 100.5). None if malformed."""
    try:
        value = Decimal(text)
    except (InvalidOperation, ValueError, TypeError):
        return None
    if not value.is_finite():
        return None
    half = Decimal(1).scaleb(value.as_tuple().exponent) / 2
    return float(value), float(value - half), float(value + half)


@lru_cache(maxsize=65536)
@lru_cache(maxsize=65536)
def parse_reference(ref: str) -> tuple[str | None, str | None, str | None]:
    """'Patient/1', 'Patient/1/_history/2', 'http://x/fhir/Patient/1', 'urn:uuid:…' -> (type, id, url)."""
    if not ref or ref.startswith("#"):
        return None, None, None
    url = ref if "://" in ref or ref.startswith("urn:") else None
    parts = ref.split("/")
    if "_history" in parts:
        parts = parts[: parts.index("_history")]
    if len(parts) >= 2 and parts[-2][:1].isupper() and parts[-2].isalpha():
        return parts[-2], parts[-1], url
    return None, (None if url else ref), url
