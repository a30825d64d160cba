"""Is a fact met (scorer v4)? Only by a TRUE claim about its subject that answers the asked qualifier.

- latest: a claim qualified latest ("latest", "now", "from … to 1.8"), dated on the fact's day, or the one
  value the answer states for the subject without saying which (a list of values that says none of them is
  the latest answers nothing); value_at: a claim dated on its day, qualified previous, or that one value;
  min / max / mean: a claim with that qualifier, or that one value.
- Any wrong or invented claim about the subject answering the same question fails the fact beside it (two
  latest values, one of them wrong, are a guess).
- count: the right number as a count of results (a spray of numbers where the right one stands among others
  fails), or a list naming exactly the items counted (the fact's `list_en` / `list_zh`).
- exists / absent: the subject named, said absent by a negation before the name or right after it heading
  its clause ("K: none in the last 24 h"; a value dated outside the window beside it does not make it
  present), and a negation of other ones only ("no other warfarin orders") saying nothing of this one.
Other kinds (trend, decision, strings) are v3's, read on the rewritten answer.
"""

from __future__ import annotations

import re

from contracts.scenario import Fact
from services.consumers.scoring.lexicon import expand_terms, lexicon
from services.consumers.scoring.text import Hit, find, normalize
from services.consumers.scoring.units import analyte_of
from services.consumers.scoring.v3.subjects import subject_of
from services.consumers.scoring.v4.claim_model import ResultClaim, Verified
from services.consumers.scoring.v4.reading import reading
from services.consumers.scoring.v4.verify import matches

AGGREGATES = ("min", "max", "mean")


def _sole(about: list[Verified]) -> set[float]:
    return {v.claim.value for v in about if v.claim.qualifier is None}


def answers(fact: Fact, claim: ResultClaim, unqualified: set[float]) -> bool:
    """Does `claim` answer what `fact` asks (its qualifier)? `unqualified`: the values the answer states
    about the subject without saying which result they are."""
    q = claim.qualifier
    day = (fact.time.month, fact.time.day) if fact.time is not None else None
    dated_right = claim.month_day is None or day is None or claim.month_day == day
    if q is None:
        return len(unqualified) == 1
    if q == "at":
        return claim.month_day == day if day is not None else len(unqualified) <= 1
    if fact.kind in ("latest", "value_at"):  # the latest before an event ("before the KCl: 3.6") is previous
        return q in ("latest", "previous") and dated_right
    if fact.kind in AGGREGATES:
        return q == fact.kind
    return False


def _qualified(v: Verified) -> str:
    return f" ({v.claim.qualifier})" if v.claim.qualifier else ""


def numeric_fact(fact: Fact, verified: list[Verified]) -> tuple[bool, str]:
    key = subject_of(fact)
    name = key.rsplit("|", 1)[-1]
    about = [v for v in verified if v.claim.subject == key and v.claim.is_result]
    analyte = analyte_of(fact.code, fact.label.en if fact.label else None)
    stating = [v for v in about if matches(v.claim, float(fact.value), fact.unit, analyte)]  # type: ignore[arg-type]
    unqualified = _sole(about)
    hits = [v for v in stating if v.verdict == "true" and answers(fact, v.claim, unqualified)]
    shown = ", ".join(f"{v.claim.base.cited.text}{_qualified(v)}={v.verdict}" for v in about[:6]) or "none"
    if not hits:
        why = "states it without saying which result it is" if stating else "no true claim states it"
        return False, f"{name} {fact.value} {fact.unit or ''}: {why} (claims: {shown})"
    rivals = [v for v in about if v.verdict != "true" and (v.claim.qualifier is None or any(
        v.claim.qualifier == h.claim.qualifier for h in hits))]
    if rivals:
        return False, f"{name}: wrong claims beside the right one ({shown})"
    return True, f"{name}: {hits[0].claim.base.cited.text} ({hits[0].claim.qualifier or 'the one value'})"


def count_fact(fact: Fact, claims: list[ResultClaim], norm: str, names: list[str]) -> tuple[bool, str]:
    target = int(fact.value)  # type: ignore[arg-type]
    counts = [c for c in claims if c.kind == "count" and not c.base.in_question and not c.base.cited.decimals]
    hit = [c for c in counts if c.value == target]
    listed = _listed(fact)
    complete = bool(listed) and all(find(norm, _item_names(en, zh)) for en, zh in listed)
    if hit:
        clause = hit[0].base.clause
        others = [c for c in counts if c.base.clause == clause and c.value != target]
        if others and not complete and not _breakdown({target, *(c.value for c in others)}):
            return False, f"count {target} stands among other counts " \
                          f"({', '.join(c.base.cited.text for c in others[:5])})"
        return True, f"counts {hit[0].base.cited.text}"
    if complete:
        return True, f"lists all {len(listed)} items counted"
    none = find(norm, ["none", "no ", "没有", "无"])
    if target == 0 and not listed and none and names and find(norm, names):
        return True, "says there are none"
    return False, f"count {target} not stated as a count (counts: " \
                  f"{', '.join(c.base.cited.text for c in counts[:5]) or 'none'})"


def _breakdown(values: set[float]) -> bool:
    """A total and its parts ("5 results: 4 serum + 1 whole blood"): the largest is the sum of the rest.
    Numbers that add up to nothing are a spray."""
    return len(values) >= 3 and 2 * max(values) == sum(values)


def _item_names(en: str, zh: str) -> list[str]:
    """How an answer may name one listed item: in full, by its first word, by a clinician's alias or
    translation (keyed by the full name or the first word)."""
    low = " ".join(en.lower().split())
    head = re.split(r"[\s/,-]", low)[0]
    aliases = reading()["item_aliases"]
    return [low, zh.lower(), *aliases.get(low, []), *aliases.get(head, []),
            *([head] if len(head) >= 4 else [])]


def _listed(fact: Fact) -> list[tuple[str, str]]:
    extra = fact.model_extra or {}
    en = [n for n in str(extra.get("list_en", "")).split(", ") if n and n != "none"]
    zh = [n for n in str(extra.get("list_zh", "")).split("、") if n and n != "无"]
    return list(zip(en, zh if len(zh) == len(en) else en, strict=True))


_CLAUSE_END = re.compile(r"[.;。；\n]")


def _negated_after(norm: str, hit: Hit) -> bool:
    """The name heads a statement that negates it: "potassium: none", "钾：最近一天没有查"."""
    p = reading()["presence"]
    after = norm[hit.end:hit.end + p["window"]]
    after = after[:m.start()] if (m := _CLAUSE_END.search(after)) else after
    if not after.lstrip().startswith((":", "：")):  # not a label: the negation must follow the name at once
        after = re.split(r"[,，、(（]", after)[0][:p["right_after"]]
    cues = [*p["negated_after"]["en"], *p["negated_after"]["zh"]]
    return bool(find(after, cues)) and not after.lstrip(" :：").startswith(tuple("0123456789"))


def _denies_others(norm: str, hit: Hit) -> bool:
    """The negation before the name denies other ones ("no other active warfarin", "没有第二条华法林")."""
    p = reading()["presence"]["other"]
    before = norm[max(0, hit.start - 24):hit.start]
    return bool(find(before, [*p["en"], *p["zh"]]))


def presence_fact(text: str, fact: Fact) -> tuple[bool, str]:
    """exists / absent (see the module)."""
    want_present = fact.kind != "absent" and (fact.value is not False)
    norm = normalize(text)
    hits = find(norm, expand_terms([fact.label.en, fact.label.zh] if fact.label else []))
    if not hits:
        return False, "the fact's subject is not named"
    lex = lexicon()["presence"]["absent"]
    cues = find(norm, [*lex["en"], *lex["zh"]])
    before = [h for h in hits if (h.negated or any(c.end <= h.start and h.start - c.end <= 12 for c in cues))
              and not _denies_others(norm, h)]
    said_absent = bool(before) or any(_negated_after(norm, h) for h in hits)
    said, wanted = ("absent" if said_absent else "present"), ("present" if want_present else "absent")
    return said_absent != want_present, f"named as {said}; expected {wanted}"


__all__ = ["count_fact", "normalize", "numeric_fact", "presence_fact"]
