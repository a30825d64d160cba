"""asked_patient (v3): the patient check uses the patient. It passes when the patient, asked this turn or an
earlier one, disclosed at least one of the item's memory facts (the ids `rounds.message.patient` carries)
and the answer uses every disclosed one (names one of its topics, EN or ZH). A question that named a topic
word but got nothing, or an answer that ignores what was said, fails."""

from __future__ import annotations

import re
from collections.abc import Callable

from contracts.scenario import RubricItem
from services.consumers.scoring.check_inputs import CheckContext, CheckResult
from services.consumers.scoring.checks.kinds.asked_patient import memory_topics
from services.consumers.scoring.lexicon import claims
from services.consumers.scoring.text import find, normalize


def _overlaps(answer: str, said: str) -> bool:
    """The answer repeats part of what the patient said: `patient_echo` words in a row (EN) or characters
    (ZH) of data/claims.json."""
    echo = claims()["patient_echo"]
    n, k = echo["words"], echo["chars_zh"]
    words = re.findall(r"[a-z']+", said)
    if any(" ".join(words[i:i + n]) in answer for i in range(len(words) - n + 1)):
        return True
    zh = re.sub(r"[^\u3400-\u9fff]", "", said)
    return any(zh[i:i + k] in answer for i in range(len(zh) - k + 1))


def asked_patient(item: RubricItem, ctx: CheckContext,
                  terms: Callable[[list[str]], list[str]] = list) -> CheckResult:
    """`terms`: the words that name a topic in an answer (v3: the topics themselves; v4 adds the clinical
    terms of lay words)."""
    wanted = [str(f) for f in item.params.get("facts") or ctx.turn.patient_facts]
    if not wanted:
        return CheckResult(False, "rubric item names no patient facts")
    limit = ctx.log.answer_position if ctx.log.answer_position is not None else float("inf")
    earlier = [t for i, t in sorted(ctx.session.turns.items()) if i <= ctx.log.index]
    replies = [m for t in earlier for m in t.patient_replies if m.position < limit]
    disclosed = {fact_id: next(r for r in replies if fact_id in r.disclosed) for fact_id in wanted
                 if any(fact_id in r.disclosed for r in replies)}
    if not disclosed:
        return CheckResult(False, f"the patient disclosed none of {', '.join(wanted)} before the answer")
    answer = normalize(ctx.log.answer_text)
    unused = []
    for fact_id in disclosed:
        found = memory_topics(ctx.scenario, fact_id)
        if found is None:
            unused.append(f"{fact_id} (unknown fact)")
            continue
        memory, topics = found
        said = [memory.text.en, memory.text.zh] + ([memory.lay.en, memory.lay.zh] if memory.lay else [])
        if not find(answer, terms(topics)) and not any(_overlaps(answer, normalize(s)) for s in said):
            unused.append(fact_id)
    if unused:
        return CheckResult(False, f"the answer does not use what the patient disclosed: {', '.join(unused)}")
    first = min(r.position for r in disclosed.values())
    return CheckResult(True, f"uses {', '.join(disclosed)} (disclosed from event #{first})")
