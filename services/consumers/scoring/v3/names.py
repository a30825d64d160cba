"""Where an answer names its subjects, and its clauses: the one name search every kind of claim shares.

`names_in` finds every subject name of a session in one pass over the word starts of a text (EN on word
boundaries, ZH as substrings), leftmost-longest and non-overlapping; `Named` holds the hits in order, so the
name nearest before a position or the first after it is a bisection, not a scan. Numbers (claims.py) and
conclusion cues (cues.py) are attributed to subjects through it, so "potassium chloride" is one name (the
drug) wherever it stands, whatever is attributed to it.
"""

from __future__ import annotations

import re
from bisect import bisect_left, bisect_right
from collections.abc import Callable, Mapping
from functools import lru_cache

from services.consumers.scoring.text import Hit, normalize

_CLAUSE_END = re.compile(r"[;!?\n。；！？]|\.(?!\d)")
_ASCII = frozenset("abcdefghijklmnopqrstuvwxyz0123456789")
_START = re.compile(r"(?<![a-z0-9])[a-z0-9]|[^\sa-z0-9]")


def clauses(norm: str) -> list[tuple[int, int]]:
    """(start, end) of each clause: a claim's context ends at ; ! ? a newline or a full stop (not a decimal
    point), EN or ZH."""
    out, start = [], 0
    for match in _CLAUSE_END.finditer(norm):
        out.append((start, match.end()))
        start = match.end()
    out.append((start, len(norm)))
    return out


@lru_cache(maxsize=64)
def _names_index(names: tuple[str, ...]) -> dict[str, list[str]]:
    """First character -> the names starting with it, longest first."""
    index: dict[str, list[str]] = {}
    for name in sorted({n for n in names if n}, key=len, reverse=True):
        index.setdefault(name[0], []).append(name)
    return index


def names_in(norm: str, names: tuple[str, ...]) -> list[Hit]:
    """Leftmost-longest, non-overlapping occurrences of `names` (EN on word boundaries, ZH as substrings):
    one pass over the word starts of the answer, whatever the number of names."""
    index = _names_index(names)
    hits: list[Hit] = []
    taken = 0
    for start in _START.finditer(norm):
        at = start.start()
        if at < taken:
            continue
        for name in index.get(norm[at], ()):
            end = at + len(name)
            if norm.startswith(name, at) and (name[-1] not in _ASCII or end >= len(norm)
                                              or norm[end] not in _ASCII):
                hits.append(Hit(name, at, end, False))
                taken = end
                break
    return hits


def owners(subjects: Mapping[str, list[str]]) -> tuple[dict[str, list[str]], tuple[str, ...]]:
    """Lowercased name -> its subjects, and the names longest first; once per mapping (subject_names gives
    one mapping per scenario, so the turns of a run share it)."""
    cached = _OWNERS.get(id(subjects))
    if cached is not None and cached[0] is subjects:
        return cached[1], cached[2]
    owner: dict[str, list[str]] = {}
    for key, names in subjects.items():
        for name in names:
            owner.setdefault(name.lower(), []).append(key)
    ordered = tuple(sorted(owner, key=len, reverse=True))
    if len(_OWNERS) >= 256:
        _OWNERS.pop(next(iter(_OWNERS)))
    _OWNERS[id(subjects)] = (subjects, owner, ordered)  # the mapping is held: its id stays its own
    return owner, ordered


_OWNERS: dict[int, tuple[Mapping[str, list[str]], dict[str, list[str]], tuple[str, ...]]] = {}


def named_in(norm: str, subjects: Mapping[str, list[str]]) -> Named:
    """`Named(norm, subjects)`, the last one kept: an answer's claims and its verdicts read the same text
    with the same names (one search instead of two over a long answer)."""
    last = _LAST_NAMED[0]
    if last is not None and last[0] is subjects and last[1] == norm:
        return last[2]
    found = Named(norm, subjects)
    _LAST_NAMED[0] = (subjects, norm, found)
    return found


_LAST_NAMED: list[tuple[Mapping[str, list[str]], str, Named] | None] = [None]


class Named:
    """The subject names of one normalised text, in order, with their owners (name -> subject keys)."""

    def __init__(self, norm: str, subjects: Mapping[str, list[str]]) -> None:
        self.owner, ordered = owners(subjects)
        self.hits = names_in(norm, ordered)
        self.starts = [h.start for h in self.hits]
        self.ends = [h.end for h in self.hits]  # hits never overlap, so their ends are sorted too

    def keys(self, hit: Hit) -> list[str]:
        return self.owner[hit.cue]

    def before(self, at: int, start: int, most: int = 4) -> list[Hit]:
        """The last `most` hits ending by `at` and starting at or after `start`, in order."""
        out: list[Hit] = []
        for i in range(bisect_right(self.ends, at) - 1, -1, -1):
            if self.hits[i].start < start or len(out) >= most:
                break
            out.insert(0, self.hits[i])
        return out

    def nearest_before(self, at: int, start: int, most: int = 4) -> list[Hit]:
        """`before`, nearest first (what a number's subject search walks)."""
        out: list[Hit] = []
        last = bisect_right(self.ends, at) - 1
        for i in range(last, max(-1, last - most), -1):
            if self.hits[i].start < start:
                break
            out.append(self.hits[i])
        return out

    def after(self, at: int, end: int) -> Hit | None:
        """The first hit starting at or after `at` and before `end`."""
        i = bisect_left(self.starts, at)
        return self.hits[i] if i < len(self.hits) and self.hits[i].start < end else None

    def inside(self, at: int) -> bool:
        """Is `at` inside a name ("0.9" of "Sodium Chloride 0.9% Flush", "12" of "B12")?"""
        i = bisect_right(self.starts, at) - 1
        return i >= 0 and self.hits[i].end > at

    def first_key(self, hit: Hit, fits: Callable[[str], bool]) -> str | None:
        return next((k for k in self.owner[hit.cue] if fits(k)), None)


def subjects_named(text: str, subjects: Mapping[str, list[str]]) -> set[str]:
    """Every subject key a text names (a physician's message, a fact's own strings)."""
    named = Named(normalize(text), subjects)
    return {key for hit in named.hits for key in named.keys(hit)}
