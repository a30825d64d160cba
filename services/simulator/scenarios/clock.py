"""The chart's local time: every time a scenario states (its `now`, a fact's time and window, the times in the
physician's words, the reference answers and the expected writes) is written in the record's own local time
with its UTC offset, as the record writes its own times.

MIMIC's times are local wall-clock times and the mapper renders them in one zone (`fhir_mapper.values.ZONE`,
America/New_York: -05:00 in winter, -04:00 in summer), so "tomorrow at 8 am" is 08:00 on the ward, not 08:00
UTC. The builder computes in absolute time (comparisons and offsets are exact across a DST change) and turns a
time into local time only where it is written."""

from __future__ import annotations

from datetime import datetime, timedelta

from fhir_mapper.values import ZONE


def local(when: datetime) -> datetime:
    """The same instant in the record's local time (an aware datetime whose offset follows DST)."""
    if when.tzinfo is None:
        raise ValueError(f"a naive time has no place in a chart: {when.isoformat()}")
    return when.astimezone(ZONE)


def next_morning(now: datetime, hour: int = 8) -> datetime:
    """`hour`:00 on the ward the day after `now` (local), with that day's offset."""
    day = local(now).date() + timedelta(days=1)
    return datetime(day.year, day.month, day.day, hour, tzinfo=ZONE)


def clock(when: datetime | None) -> str:
    """A time as the physician reads it on the ward: local date and wall clock, minutes."""
    return local(when).strftime("%Y-%m-%d %H:%M") if when else ""
