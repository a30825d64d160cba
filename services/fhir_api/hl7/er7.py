"""The small ER7 (pipe-and-hat) rules hl7apy leaves to its caller: escaping text, FHIR dateTimes as HL7 TS,
the v2.5.1 lengths of the fields Rounds fills, and stable message control ids.

Why stable ids: delivery is at least once (a lost ACK means the message is sent again), so a receiver
de-duplicates on MSH-10; the id is derived from what the message says (session, event key) and so is the
same when the feed runs again.
"""

from __future__ import annotations

import json
import uuid
from datetime import datetime
from functools import lru_cache
from pathlib import Path
from typing import Any

NAMESPACE = uuid.UUID("6c1f7c52-5a0e-4c55-9d87-0b6a3e1e2f42")
CONTROL_ID_LENGTH = 20  # MSH-10 is ST(20) in v2.5.1
_ESCAPES = (("\\", "\\E\\"), ("|", "\\F\\"), ("^", "\\S\\"), ("&", "\\T\\"), ("~", "\\R\\"),
            ("\r\n", "\\.br\\"), ("\n", "\\.br\\"), ("\r", "\\.br\\"))


@lru_cache(maxsize=1)
def tables() -> dict[str, Any]:
    """data/v2.json: names, profiles and code tables (the only copy)."""
    return json.loads((Path(__file__).parent / "data" / "v2.json").read_text())


def escape(text: str) -> str:
    """Text made safe for one ER7 field component (HL7 v2 section 2.7 escape sequences)."""
    for raw, escaped in _ESCAPES:
        text = text.replace(raw, escaped)
    return text


def unescape(text: str) -> str:
    """The inverse of `escape` for what a sender's text may carry."""
    for raw, escaped in reversed(_ESCAPES[:6]):
        text = text.replace(escaped, raw if raw != "\r\n" else "\n")
    return text


def clip(text: str, length: int) -> str:
    """Cut escaped text to a field's length without splitting an escape sequence."""
    if len(text) <= length:
        return text
    cut = text[:length]
    open_at = cut.rfind("\\")
    if open_at != -1 and cut.count("\\") % 2 == 1:
        cut = cut[:open_at]
    return cut


def ts(value: str | None) -> str:
    """A FHIR date or dateTime as HL7 TS/DTM (YYYYMMDD[HHMMSS±ZZZZ]); '' when absent."""
    if not value:
        return ""
    if "T" not in value:
        return value.replace("-", "")
    when = datetime.fromisoformat(value.replace("Z", "+00:00"))
    text = when.strftime("%Y%m%d%H%M%S")
    return text + when.strftime("%z") if when.tzinfo else text


def from_ts(value: str) -> str:
    """An HL7 TS (as `ts` writes it, or a date) as a FHIR dateTime / date."""
    value = value.strip()
    digits, sign, zone = value, "", ""
    for mark in "+-":
        if mark in value[8:]:
            digits, zone = value.split(mark, 1) if value.count(mark) == 1 else (value, "")
            sign = mark
    if len(digits) == 8:
        return f"{digits[:4]}-{digits[4:6]}-{digits[6:8]}"
    if len(digits) < 12:
        raise ValueError(f"not an HL7 timestamp: {value!r}")
    seconds = digits[12:14] or "00"
    offset = f"{sign}{zone[:2]}:{zone[2:4]}" if sign else "Z"
    return f"{digits[:4]}-{digits[4:6]}-{digits[6:8]}T{digits[8:10]}:{digits[10:12]}:{seconds}{offset}"


def control_id(stream: str, key: str) -> str:
    """MSH-10 for the message `key` of `stream` (a session): the same every time it is sent."""
    return uuid.uuid5(NAMESPACE, f"{stream}/{key}").hex[:CONTROL_ID_LENGTH]
