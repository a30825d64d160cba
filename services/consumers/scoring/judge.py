"""The optional LLM judge (off by default): an OpenAI-compatible chat-completions endpoint judges free-text
criteria (`llm_judge` items) and, for the report's agreement figure, any item with a description that a
deterministic check also judged. Every verdict records the model and the prompt version.

`--judge MODEL@BASE_URL` on `rounds score` / `rounds consume scorer` turns it on (`ROUNDS_JUDGE_API_KEY` for a
key). A judge that cannot answer is infrastructure (`RetryLater`: the batch is retried), never a failed item.
The scorer asks it in its batch's prefetch, outside the database transaction (`Verdicts` answers inside).
"""

from __future__ import annotations

import time
from typing import Any

import httpx
import orjson

from contracts.scenario import RubricItem
from events.projections.retry import RetryLater
from services.consumers.scoring.check_inputs import CheckContext, CheckResult

PROMPT_VERSION = "judge-v1"
SYSTEM = (
    "You grade one answer of a clinical assistant against one criterion. Reply with a JSON object "
    '{"passed": true|false, "reason": "<one sentence>"} and nothing else. Judge only the criterion.'
)


def criterion_of(item: RubricItem, language: str) -> str | None:
    """The free-text criterion of an item: llm_judge's `criterion`, else the item's description."""
    criterion = item.params.get("criterion")
    if isinstance(criterion, dict):
        return criterion.get(language) or next(iter(criterion.values()), None)
    if item.description is not None:
        return getattr(item.description, language)
    return None


class LlmJudge:
    def __init__(self, model: str, base_url: str, *, api_key: str | None = None, timeout_s: float = 60,
                 client: httpx.Client | None = None) -> None:
        self.model, self.prompt_version = model, PROMPT_VERSION
        key = api_key or "unused"  # ROUNDS_JUDGE_API_KEY, handed by the command (a local server checks none)
        self.client = client or httpx.Client(base_url=base_url.rstrip("/"), timeout=timeout_s,
                                             headers={"Authorization": f"Bearer {key}"})

    @classmethod
    def from_spec(cls, spec: str, api_key: str | None = None) -> LlmJudge:
        """`MODEL@BASE_URL`, e.g. `gpt-4o-mini@https://api.openai.com/v1`; `openai:MODEL@BASE_URL` (the
        assistants' spelling) names the same judge."""
        model, sep, base = spec.removeprefix("openai:").partition("@")
        if not sep or not model or not base.startswith(("http://", "https://")):
            raise ValueError(f"judge spec must be MODEL@http(s)://BASE_URL, got {spec!r}")
        return cls(model, base, api_key=api_key)

    def describe(self) -> dict[str, Any]:
        return {"model": self.model, "prompt_version": self.prompt_version}

    def __call__(self, item: RubricItem, ctx: CheckContext) -> CheckResult:
        criterion = criterion_of(item, ctx.language)
        if not criterion:
            return CheckResult(False, "judge: the item states no criterion")
        question = ctx.log.doctor.text if ctx.log.doctor else ""
        user = f"Physician's question:\n{question}\n\nAssistant's answer:\n{ctx.log.answer_text}\n\n" \
               f"Criterion:\n{criterion}"
        body = {"model": self.model, "temperature": 0,
                "messages": [{"role": "system", "content": SYSTEM}, {"role": "user", "content": user}]}
        started = time.perf_counter()
        try:
            response = self.client.post("/chat/completions", json=body)
            response.raise_for_status()
            content = response.json()["choices"][0]["message"]["content"]
        except (httpx.HTTPError, KeyError, IndexError, ValueError) as exc:
            raise RetryLater(f"judge {self.model} unavailable: {exc}") from exc
        try:
            verdict = orjson.loads(content.strip().removeprefix("```json").removesuffix("```"))
            passed = verdict["passed"]
            if not isinstance(passed, bool):
                raise TypeError("passed is not a boolean")
        except (orjson.JSONDecodeError, KeyError, TypeError):
            unreadable = f"unreadable verdict {content[:200]!r}"
            return CheckResult(False, f"judge {self.model}/{PROMPT_VERSION}: {unreadable}",
                               self._call(started, unreadable))
        reason = str(verdict.get("reason", ""))[:300]
        return CheckResult(passed, f"judge {self.model}/{PROMPT_VERSION}: {reason}",
                           self._call(started, reason))

    def _call(self, started: float, reason: str) -> dict[str, Any]:
        """What the call was, for its `rounds.score.judge` event (events_out.py `judge_events`)."""
        return {"judge_call": {"model": self.model, "prompt_version": self.prompt_version, "reason": reason,
                               "latency_ms": round((time.perf_counter() - started) * 1000, 3)}}


class Verdicts:
    """A judge that answers from verdicts judged ahead (the scorer's prefetch, outside the database
    transaction), keyed by (session, turn, item id): the transaction never waits on the network. A verdict
    that was not judged ahead is `RetryLater` (the batch is judged again), never a guess."""

    def __init__(self, judge: Any, verdicts: dict[tuple[str, int, str], CheckResult]) -> None:
        self.judge, self.verdicts = judge, verdicts
        self.model, self.prompt_version = judge.model, judge.prompt_version

    def describe(self) -> dict[str, Any]:
        return self.judge.describe()

    def __call__(self, item: RubricItem, ctx: CheckContext) -> CheckResult:
        key = (ctx.session.session_id, ctx.log.index, item.id)
        if key not in self.verdicts:
            raise RetryLater(f"no verdict judged ahead for {key}")
        return self.verdicts[key]
