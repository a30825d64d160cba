"""Is an answer the gold result of a SQL question (FHIR-AgentBench's `true_answer`), as a clinician or an
agent would write it? Deterministic, over the scorer's own readings: numbers (numbers.py, rounding as
facts.py's `number_matches`), dates and times (v4's date and time spans), verdict cues (the lexicon's,
negation included).

The gold's shapes: `[[1]]`/`[[0]]` of a `COUNT(*) > 0` question is yes / no; `[]` and `[[None]]` are no
result ("none", "no record"); every other value is a number (also a numeric string: doses are text in
MIMIC), a time in the record's local wall clock ("2155-12-03 14:00:00") or a text; several rows are a list
whose items may come in any order. A number passes at the precision the answer wrote it (at least two
significant digits), a time to the minute with or without the record's offset (converted to its zone), a text
written out (case, spacing and punctuation aside) or by its alias ("M": male).

What merely contains the gold is no answer: a list of candidates among which the gold sits fails — other
numbers than the gold's (outside parentheses, dates, times and identifiers, and other than the question's own
numbers), other times, other short items of a comma-separated list.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime
from functools import cache
from typing import Any
from zoneinfo import ZoneInfo

from services.consumers.scoring.checks.facts import number_matches
from services.consumers.scoring.lexicon import lexicon, load
from services.consumers.scoring.numbers import Cited, cited_numbers
from services.consumers.scoring.text import find, normalize
from services.consumers.scoring.v4.reading import span_patterns
from services.consumers.scoring.v4.tokens import Spans

_GOLD_TIME = re.compile(r"^(\d{4})-(\d{2})-(\d{2})[ T](\d{2}):(\d{2})(?::(\d{2}))?$")
_NUMERIC = re.compile(r"^-?\d+(?:\.\d*)?$|^-?\.\d+$")
_ISO = re.compile(r"(\d{4})-(\d{1,2})-(\d{1,2})(?:[t ](\d{1,2}):(\d{2})(?::(\d{2}))?(z|[+-]\d{2}:?\d{2})?)?")
_SLASH = re.compile(r"(\d{1,2})/(\d{1,2})/(\d{4})")
_CLOCK = re.compile(r"(\d{1,2})(?::(\d{2}))?(?::(\d{2}))?\s?([ap])?\.?m?\.?|(\d{2})(\d{2})h")
_MONTHS = ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec")


@cache
def data() -> dict[str, Any]:
    return load("sql_answers")


@dataclass(frozen=True)
class GoldValue:
    kind: str  # number | time | text
    number: float | None = None
    time: datetime | None = None  # the record's wall clock, naive
    text: str = ""


@dataclass(frozen=True)
class Gold:
    shape: str  # none | yes_no | values
    verdict: str | None = None  # yes | no (shape yes_no)
    values: tuple[GoldValue, ...] = ()


def gold_of(rows: list[list[Any]], boolean: bool) -> Gold:
    """The gold's shape from its SQL rows (`boolean`: the SQL asks COUNT(*) > 0)."""
    flat = [v for row in rows for v in row]
    if not flat or all(v is None for v in flat):
        return Gold("none")
    if boolean and len(flat) == 1 and isinstance(flat[0], int | float | bool):
        return Gold("yes_no", "yes" if flat[0] else "no")
    values: dict[GoldValue, None] = {}
    for v in flat:
        if v is not None:
            values[_value(v)] = None
    return Gold("values", values=tuple(values))


def _value(v: Any) -> GoldValue:
    if isinstance(v, bool):
        return GoldValue("number", number=float(v))
    if isinstance(v, int | float):
        return GoldValue("number", number=float(v))
    text = " ".join(str(v).split())
    if _NUMERIC.match(text):
        return GoldValue("number", number=float(text))
    if m := _GOLD_TIME.match(text):
        y, mo, d, h, mi, s = (int(x or 0) for x in m.groups())
        return GoldValue("time", time=datetime(y, mo, d, h, mi, s))
    return GoldValue("text", text=text)


def judge_answer(answer: str, gold: Gold, question: str = "") -> tuple[bool, str]:
    """(passed, evidence) of `answer` against `gold`; `question`: its own numbers are no candidates."""
    norm = normalize(answer)
    if not norm.strip():
        return False, "no answer"
    if gold.shape == "none":
        said = _says_nothing(norm)
        return said, "says no result" if said else "expected no result (none / no record)"
    if gold.shape == "yes_no":
        said = verdict_of(norm)
        return said == gold.verdict, f"verdict {said or 'none'}; expected {gold.verdict}"
    missing, others = [], []
    for kind in ("number", "time", "text"):
        wanted = [v for v in gold.values if v.kind == kind]
        if wanted:
            lost, extra = _MATCHERS[kind](answer, norm, wanted, question)
            missing += lost
            others += extra
    if missing:
        return False, f"not stated: {', '.join(missing)}"
    if others:
        return False, f"a list of candidates: also {', '.join(others[:5])}"
    return True, "states " + ", ".join(_shown(v) for v in gold.values)


def _shown(v: GoldValue) -> str:
    if v.kind == "number":
        return f"{v.number:g}"
    return v.time.isoformat(sep=" ") if v.time else v.text


def _cues(name: str) -> list[str]:
    return [c for lang in ("en", "zh") for c in data()[name][lang]]


def _says_nothing(norm: str) -> bool:
    return any(not hit.negated for hit in find(norm, _cues("no_result")))


def verdict_of(norm: str) -> str | None:
    """The answer's first verdict: the lexicon's yes/no cues and the record's ("it was not given", "no
    record": no); a negated yes is a no."""
    conclusion = lexicon()["conclusion"]
    yes = [*_cues("yes"), *conclusion["yes"]["en"], *conclusion["yes"]["zh"]]
    no = [*_cues("no"), *_cues("no_result"), *conclusion["no"]["en"], *conclusion["no"]["zh"]]
    labels = {c.lower(): "no" for c in no} | {c.lower(): "yes" for c in yes if c.lower() not in no}
    for hit in find(norm, list(labels)):
        label = labels[hit.cue]
        return "no" if hit.negated and label == "yes" else label
    return None


def _numbers(answer: str, norm: str, wanted: list[GoldValue], question: str) -> tuple[list[str], list[str]]:
    asked = {c.value for c in cited_numbers(question)}
    spans = Spans(norm)
    dated = [m.span() for m in re.finditer(data()["not_candidates"], norm)]
    cited = [c for c in cited_numbers(answer) if not _in_parentheses(norm, c)
             and getattr(spans.at(c.start), "kind", "list_marker") == "list_marker"  # "1." may be the answer
             and not any(s <= c.start < e for s, e in dated)]
    missing, matched = [], set()
    for v in wanted:
        hits = [c for c in cited if _number_is(c, v.number or 0.0, norm)]
        if not hits and not (v.number == 0 and _says_nothing(norm)):
            missing.append(_shown(v))
        matched |= {id(c) for c in hits}
    others = [c.text for c in cited if id(c) not in matched and c.value not in asked]
    return missing, others


def _number_is(cited: Cited, target: float, norm: str) -> bool:
    if target >= 0:
        return number_matches(cited, target, None)
    before = norm[:cited.start].rstrip()
    signed = before.endswith(("-", "−")) or bool(find(norm, lexicon()["conclusion"]["down"]["en"]))
    return signed and number_matches(cited, -target, None)


def _in_parentheses(norm: str, cited: Cited) -> bool:
    return norm.rfind("(", 0, cited.start) > norm.rfind(")", 0, cited.start)


def _times(answer: str, norm: str, wanted: list[GoldValue], question: str) -> tuple[list[str], list[str]]:
    written = answer_times(norm)
    missing = [_shown(v) for v in wanted if not any(_same_time(w, v.time) for w in written)]
    others = [w[0].isoformat(sep=" ", timespec="minutes") for w in written
              if w[1] and not any(_same_time(w, v.time) for v in wanted)]
    return missing, others


def _same_time(written: tuple[datetime, bool, bool], gold: datetime | None) -> bool:
    when, has_time, has_seconds = written
    if gold is None:
        return False
    if not has_time:
        return when.date() == gold.date() and gold.time() == datetime.min.time()
    if has_seconds:
        return when == gold
    return when.replace(second=0) == gold.replace(second=0) and gold.second == 0


def answer_times(norm: str) -> list[tuple[datetime, bool, bool]]:
    """Every date the answer writes, with its time when one follows it: (wall clock in the record's zone,
    has a time, has seconds). A time written with an offset is converted to the record's zone."""
    zone = ZoneInfo(data()["zone"])
    dates = [(m.start(), m.end()) for kind, p in span_patterns() if kind == "date" for m in p.finditer(norm)]
    times = [(m.start(), m.end()) for kind, p in span_patterns() if kind == "time" for m in p.finditer(norm)]
    out = []
    for start, end in sorted(set(dates)):
        if any(s <= start and end <= e and (s, e) != (start, end) for s, e in dates):
            continue  # inside a longer date
        found = _date(norm[start:end])
        if found is None:
            continue
        when, has_time, has_seconds, offset = found
        if not has_time:
            gap = norm[end:end + 12]
            clock = next((norm[s:e] for s, e in times if end <= s <= end + len(gap) and _joined(norm[end:s])),
                         None)
            parsed = _clock(clock) if clock else None
            if parsed:
                when, has_time, has_seconds = when.replace(hour=parsed[0], minute=parsed[1],
                                                           second=parsed[2]), True, parsed[3]
        if offset:
            sign = 1 if offset == "z" else (1 if offset[0] == "+" else -1)
            minutes = 0 if offset == "z" else sign * (int(offset[1:3]) * 60 + int(offset[-2:]))
            aware = when.replace(tzinfo=ZoneInfo("UTC")).timestamp() - minutes * 60
            when = datetime.fromtimestamp(aware, zone).replace(tzinfo=None)
        out.append((when, has_time, has_seconds))
    return out


def _joined(between: str) -> bool:
    words = [w for w in re.split(r"[\s,]+", between.strip()) if w]
    return all(w in data()["time_words"] for w in words)


def _date(text: str) -> tuple[datetime, bool, bool, str | None] | None:
    try:
        if m := _ISO.match(text):
            y, mo, d, h, mi, s, offset = m.groups()
            when = datetime(int(y), int(mo), int(d), int(h or 0), int(mi or 0), int(s or 0))
            return when, h is not None, s is not None, offset
        if m := _SLASH.match(text):
            return datetime(int(m.group(3)), int(m.group(1)), int(m.group(2))), False, False, None
        month = next((i + 1 for i, name in enumerate(_MONTHS) if name in text), None)
        year = re.search(r"\d{4}", text)
        day = re.search(r"(?<!\d)\d{1,2}(?!\d)", text.replace(year.group(), "") if year else text)
        if month and year and day:
            return datetime(int(year.group()), month, int(day.group())), False, False, None
    except ValueError:
        return None
    return None


def _clock(text: str) -> tuple[int, int, int, bool] | None:
    m = _CLOCK.fullmatch(text.strip())
    if not m:
        return None
    if m.group(5):
        return int(m.group(5)), int(m.group(6)), 0, False
    hour, minute, second = int(m.group(1)), int(m.group(2) or 0), int(m.group(3) or 0)
    if m.group(4) == "p" and hour < 12:
        hour += 12
    if m.group(4) == "a" and hour == 12:
        hour = 0
    return (hour, minute, second, m.group(3) is not None) if hour < 24 and minute < 60 else None


def _texts(answer: str, norm: str, wanted: list[GoldValue], question: str) -> tuple[list[str], list[str]]:
    missing = [v.text for v in wanted if not _names(norm, v.text)]
    items = _short_items(norm)
    others = [item for item in items if not any(_names(item, v.text) for v in wanted)]
    listed = sum(1 for v in wanted if any(_names(item, v.text) for item in items))
    return missing, (others if len(items) > max(listed, 1) else [])


def _names(norm: str, text: str) -> bool:
    gold = " ".join(normalize(text).split())
    spaced = " ".join(norm.split())
    names = [gold, *data()["aliases"].get(gold, [])]
    if any(re.search(rf"(?<![a-z0-9]){re.escape(n)}(?![a-z0-9])", spaced) for n in names):
        return True
    squashed = re.sub(r"[\W_]+", "", gold)
    return len(squashed) >= 4 and squashed in re.sub(r"[\W_]+", "", norm)


def _short_items(norm: str) -> list[str]:
    """The parts of a comma-, semicolon-, 'or'- or line-separated list short enough to be one item each
    (no digits: doses and dates are details of an item, not other items; no verdict cue)."""
    parts = re.split(r"[,;\n]|\s(?:or|and)\s|^\s*[-*•]\s*", norm, flags=re.MULTILINE)
    verdicts = set(_cues("yes")) | set(_cues("no"))
    out = []
    for part in parts:
        words = re.findall(r"[a-z\u3400-\u9fff][\w%.()-]*", part)
        if 0 < len(words) <= data()["list_item_words"] and not re.search(r"\d", part) \
                and part.strip(" .:") not in verdicts:
            out.append(part.strip(" .:"))
    return out


_MATCHERS = {"number": _numbers, "time": _times, "text": _texts}
