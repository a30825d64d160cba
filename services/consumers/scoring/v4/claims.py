"""An answer as result claims (scorer v4): v3's claim parser (names, clauses, units) run on the answer as
tokens.py rewrites it, then each number read as a clinician wrote it — dropped when it is part of a date, a
time, a list marker or an identifier; classed as a delta, ratio, duration, dose, MIC or count when its
context says so; and, for a result, given the qualifier that says which result it states: the nearest cue
before it since the previous number of its clause ("latest", "from … to …", "最低"), and a date written
beside it (before it in that stretch, or right after it: "1.8 mg/dL (2/28)", "1.8 on Feb 28").
"""

from __future__ import annotations

import re
from bisect import bisect_left
from collections.abc import Mapping
from dataclasses import dataclass, replace
from functools import cache

from services.consumers.scoring.text import normalize
from services.consumers.scoring.v3.claim_model import ConclusionClaim
from services.consumers.scoring.v3.claims import parse_answer
from services.consumers.scoring.v4.claim_model import ResultClaim
from services.consumers.scoring.v4.reading import reading
from services.consumers.scoring.v4.tokens import Span, Spans, number_class, rewrite, suffix_subject

_AFTER_DATE = 28  # how far after a number a date still dates it (characters)
_CHAIN = frozenset({"→", "->", "then", "to", "至", "到", "升至", "降至"})
_LABEL = re.compile(r"([^:：\n]{1,16})[:：]")  # a chart label opening a line: "钾：", "K:"
_CARRY = 60  # how far a lab's subject carries to a number naming nothing (characters, same line)


@dataclass(frozen=True)
class Reading:
    """One answer as v4 reads it."""

    text: str  # the rewritten answer
    norm: str
    claims: list[ResultClaim]
    conclusions: list[ConclusionClaim]
    spans: Spans


@cache
def _qualifier_pattern() -> tuple[re.Pattern[str], dict[str, str]]:
    """Every qualifier cue in one alternation, longest first whatever its label (so "over the last", a
    window, wins over "last", a latest), and the label of each cue."""
    label_of = {cue: label for label, cues in reading()["qualifiers"].items()
                for cue in (*cues["en"], *cues["zh"])}
    ordered = sorted(label_of, key=len, reverse=True)
    words = "|".join(re.escape(c) for c in ordered if c[:1].isascii() and c[:1].isalpha())
    others = "|".join(re.escape(c) for c in ordered if not (c[:1].isascii() and c[:1].isalpha()))
    return re.compile(rf"(?<![a-z])(?:{words})(?![a-z])|{others}"), label_of  # whole words; one lookbehind


def _lists(between: str) -> bool:
    """The qualifier qualifies a list ("the five most recent values: 1.8, 1.1, …"), not this number."""
    nouns = reading()["list_nouns"]
    return any(re.search(rf"(?<![a-z]){n}(?![a-z])", between) for n in nouns["en"]) or any(
        n in between for n in nouns["zh"])


def _next_to(date: Span, spans: Spans) -> int:
    """Where a date's stretch ends: a time right after it ("8月17日 3:03") belongs to it."""
    after = spans.at(date.end + 1)
    return after.end if after is not None and after.kind == "time" else date.end


_LEAD_WORD = re.compile(r"(?:([a-z][a-z-]*)|([\u4e00-\u9fff]+))[\s:：]*$")


def _labelled(norm: str, start: int, names: tuple[str, ...], chinese_only: bool = False) -> bool:
    """Does a word that names something else stand right before the number ("MCV 99", "铁蛋白 299")? A
    subject's own name, the qualifier cues and the `carry_through` words do not. `chinese_only`: judge
    only a Chinese run (a noun before a number), not an English word (a verb may stand there)."""
    m = _LEAD_WORD.search(norm, max(0, start - 16), start)
    if m is None or (chinese_only and not m.group(2)):
        return False
    head = norm[max(0, start - 40):start].rstrip(" :：")
    if head.endswith(names):
        return False
    through = reading()["carry_through"]
    _, label_of = _qualifier_pattern()
    if m.group(1):
        return m.group(1) not in through["en"] and m.group(1) not in label_of
    run = m.group(2)
    return not any(run.endswith(w) for w in (*through["zh"], *(c for c in label_of if not c.isascii())))


def _all_names(names: Mapping[str, list[str]]) -> tuple[str, ...]:
    """Every name lowercased, as one tuple: `str.endswith` tries them all in one call."""
    return tuple({n.lower() for ns in names.values() for n in ns if n})


def _carried(out: list[ResultClaim], norm: str, start: int, names: Mapping[str, list[str]],
             every: tuple[str, ...]) -> str | None:
    """The lab a number naming nothing is about: that of the nearest number before it in the same line that
    names one, close by ("Mg 1.9 mg/dL, WNL. Prev 2.0 (5/29)"), else the chart label heading its line
    ("钾：最近一天没有查。最近一次是 4.6")."""
    if _labelled(norm, start, every):
        return None
    previous = next((c for c in reversed(out) if c.subject is not None), None)
    if previous is not None and previous.is_result and not previous.subject.startswith(  # type: ignore[union-attr]
            ("drug:", "label:")):
        end = previous.base.cited.start + len(previous.base.cited.text)
        if start - end <= _CARRY and "\n" not in norm[end:start]:
            return previous.subject
    line = norm.rfind("\n", 0, start) + 1
    label = _LABEL.match(norm, line, start)
    if label is None:
        return None
    head = label.group(1).strip(" -*•")
    found = [(len(n), key) for key, ns in names.items() if not key.startswith(("drug:", "label:"))
             for n in ns if n and n.lower() in head]
    return max(found)[1] if found else None


def _in_cue(cues: list[tuple[int, int, str]], starts: list[int], at: int) -> bool:
    i = bisect_left(starts, at + 1) - 1
    return i >= 0 and cues[i][0] <= at < cues[i][1]


def _kind(norm: str, c) -> str:
    kind = number_class(norm, c.cited.start, c.cited.start + len(c.cited.text), c.unit)
    return "bound" if kind == "result" and c.threshold else kind


def read_answer(text: str, names: Mapping[str, list[str]], question: str | None = None) -> Reading:
    """`text` as result claims and conclusion claims (these read on the rewritten text by v3's cues)."""
    rewritten = rewrite(text)
    parsed = parse_answer(rewritten, names, question)
    norm = normalize(rewritten)
    spans = Spans(norm)
    window = reading()["qualifier_window"]
    out: list[ResultClaim] = []
    previous_end: dict[tuple[int, int], int] = {}
    pattern, label_of = _qualifier_pattern()
    cues = [(m.start(), m.end(), label_of[m.group()]) for m in pattern.finditer(norm)]  # one pass
    cue_starts = [start for start, _, _ in cues]
    chained: list[int] = []  # claims marked latest by an arrow or "then": only a chain's last one is
    kept = [c for c in parsed.claims if spans.at(c.cited.start) is None
            and not _in_cue(cues, cue_starts, c.cited.start)]  # "最近一次", "last 24": a cue's numeral
    kinds = [_kind(norm, c) for c in kept]
    next_result = [len(kept)] * (len(kept) + 1)  # the index of the next result claim after each claim
    for i in range(len(kept) - 1, -1, -1):
        next_result[i] = i if kinds[i] == "result" else next_result[i + 1]
    used: set[int] = set()  # dates written right after a number: they date it, not the next one
    every = _all_names(names)
    for i, c in enumerate(kept):
        start = c.cited.start
        end = start + len(c.cited.text)
        clause_start, clause_end = c.clause
        seg_start = max(clause_start, previous_end.get(c.clause, clause_start))
        previous_end[c.clause] = end
        seg_start = max(seg_start, start - window)
        kind = kinds[i]
        qualifier = None
        last = bisect_left(cue_starts, start) - 1
        if last >= 0 and cues[last][0] >= seg_start and cues[last][1] <= start and cues[last][2] != "window":
            qualifier = None if _lists(norm[cues[last][1]:start]) else cues[last][2]
        following = next_result[i + 1]
        next_start = kept[following].cited.start if following < len(kept) else clause_end
        before = spans.dates_between(seg_start, start)
        right_before = [d for d in before if start - _next_to(d, spans) <= 8 and d.start not in used]
        after = spans.dates_between(end, min(end + _AFTER_DATE, next_start, clause_end))
        dates = right_before or after or [
            d for d in before
            if (seg_start == clause_start or d.start >= seg_start + _AFTER_DATE) and d.start not in used]
        if dates and not right_before and dates is after:
            used.update(d.start for d in after)
        month_day = dates[-1].month_day if dates else None
        if month_day is not None and (qualifier is None or qualifier == "latest" and norm[
                cues[last][0]:cues[last][1]] in reading()["dated_over"]):
            qualifier = "at"  # "3.7 this morning and 4.2 on 03/07": the date says which result it is
        if c.subject is not None and not c.subject.startswith("label:") and _labelled(
                norm, start, every, chinese_only=True):
            c = replace(c, subject=None)  # "血红蛋白 11.4，铁蛋白 299": another label stands before it
        if c.subject is None and not c.future and (c.unit is None or "/" in c.unit) and (
                carried := _carried(out, norm, start, names, every)):
            c = replace(c, subject=carried)
        if (named := suffix_subject(norm[end:end + 24].lstrip())) is not None:
            c = replace(c, subject=named)
        if qualifier == "latest" and last >= 0 and norm[cues[last][0]:cues[last][1]] in _CHAIN:
            chained.append(len(out))
        out.append(ResultClaim(c, kind, qualifier, month_day))
    for i, j in zip(chained, chained[1:], strict=False):
        if out[i].base.clause == out[j].base.clause:
            out[i] = replace(out[i], qualifier="previous")
    return Reading(rewritten, norm, out, parsed.conclusions, spans)
