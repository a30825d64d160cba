"""The model's side of a run: latency of each model call and of each turn's calls together, tokens per turn
and per session, and — when prices are given — what the run cost.

The simulator records every model call of a tool-using adapter (`openai:`) once: on the first
`rounds.tool.result` that call produced, as `usage` (`latency_ms`, `prompt_tokens`, `completion_tokens`,
`retries`), or, for a call that produced none (cut by a timeout, the run's stop or the step limit, or
failed), as its own `rounds.model.call` with its `outcome`. This module reads
those from the log for one run's sessions (`rounds.session.started` with its `runId`) and summarises them; the
report shows it beside the scores (terminal, `--json` as `model_usage`). A run whose assistant calls no model
(`baseline`, webhooks) has no calls and no section. Prices are USD per million tokens, prompt and completion
apart, as providers list them.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable
from dataclasses import dataclass

from pydantic import BaseModel, Field
from rich.table import Table

from events.bus import Bus
from events.payloads import ModelCall, SessionStarted, ToolResult
from services.consumers.report.stats import percentile


class Spread(BaseModel):
    p50: float | None = None
    p95: float | None = None
    mean: float | None = None
    total: float = 0.0


class ModelUsage(BaseModel):
    """What `model_usage` found: per call, per turn (a turn's calls summed), per session."""

    calls: int = 0
    turns: int = 0
    sessions: int = 0
    latency_ms_per_call: Spread = Field(default_factory=Spread)
    latency_ms_per_turn: Spread = Field(default_factory=Spread)
    prompt_tokens_per_turn: Spread = Field(default_factory=Spread)
    completion_tokens_per_turn: Spread = Field(default_factory=Spread)
    prompt_tokens_per_session: Spread = Field(default_factory=Spread)
    completion_tokens_per_session: Spread = Field(default_factory=Spread)
    retries: int = 0
    cut: dict[str, int] = Field(default_factory=dict)  # outcome -> calls that produced no tool result
    cost_usd: float | None = None  # with prices
    prices_per_million: dict[str, float] | None = None


@dataclass(frozen=True)
class Call:
    session: str
    turn: int
    latency_ms: float
    prompt_tokens: int
    completion_tokens: int
    retries: int
    outcome: str | None = None  # a call that produced no tool result: rounds.model.call's outcome


def spread(values: list[float]) -> Spread:
    if not values:
        return Spread()
    return Spread(p50=percentile(values, 50), p95=percentile(values, 95), mean=sum(values) / len(values),
                  total=float(sum(values)))


def summarise(calls: Iterable[Call], prompt_price: float | None = None,
              completion_price: float | None = None) -> ModelUsage:
    """The summary of `calls`; the cost when a price is given (USD per million tokens)."""
    calls = list(calls)
    per_turn: dict[tuple[str, int], list[Call]] = defaultdict(list)
    per_session: dict[str, list[Call]] = defaultdict(list)
    for call in calls:
        per_turn[(call.session, call.turn)].append(call)
        per_session[call.session].append(call)

    def sums(groups: dict, attr: str) -> list[float]:
        return [float(sum(getattr(c, attr) for c in group)) for group in groups.values()]

    usage = ModelUsage(
        calls=len(calls), turns=len(per_turn), sessions=len(per_session),
        latency_ms_per_call=spread([c.latency_ms for c in calls]),
        latency_ms_per_turn=spread(sums(per_turn, "latency_ms")),
        prompt_tokens_per_turn=spread(sums(per_turn, "prompt_tokens")),
        completion_tokens_per_turn=spread(sums(per_turn, "completion_tokens")),
        prompt_tokens_per_session=spread(sums(per_session, "prompt_tokens")),
        completion_tokens_per_session=spread(sums(per_session, "completion_tokens")),
        retries=sum(c.retries for c in calls),
        cut=dict(sorted(Counter(c.outcome for c in calls if c.outcome).items())),
    )
    if prompt_price is not None or completion_price is not None:
        prices = {"prompt": prompt_price or 0.0, "completion": completion_price or 0.0}
        usage.prices_per_million = prices
        usage.cost_usd = (usage.prompt_tokens_per_session.total * prices["prompt"]
                          + usage.completion_tokens_per_session.total * prices["completion"]) / 1e6
    return usage


def calls_of_run(events: Iterable, run_id: str) -> list[Call]:
    """The model calls of `run_id`'s sessions among `events` (rounds.sessions in any order): the usage on
    tool results, and the calls recorded on their own (`rounds.model.call`)."""
    sessions: set[str] = set()
    found: list[tuple[str, dict, str | None]] = []
    for event in events:
        if event is None:
            continue
        data = event.data or {}
        if event.type == SessionStarted.TYPE and data.get("runId") == run_id:
            sessions.add(event.subject)
        elif event.type == ToolResult.TYPE and data.get("usage"):
            found.append((event.subject, data, None))
        elif event.type == ModelCall.TYPE:
            found.append((event.subject, data, str(data.get("outcome"))))
    return [Call(subject, data.get("turn") or 0, float(data["usage"].get("latency_ms", 0)),
                 int(data["usage"].get("prompt_tokens", 0)), int(data["usage"].get("completion_tokens", 0)),
                 int(data["usage"].get("retries", 0)), outcome)
            for subject, data, outcome in found if subject in sessions]


def load_model_usage(bus: Bus, run_id: str, prompt_price: float | None = None,
                     completion_price: float | None = None) -> ModelUsage:
    """The run's model usage from the process's log (`bus`, ROUNDS_BUS)."""
    from sqlalchemy.exc import OperationalError, ProgrammingError

    from events.archive import read_log
    from events.bus import UnknownTopic
    from events.topics import SESSIONS

    try:
        calls = calls_of_run((r.event for r in read_log(bus, [SESSIONS])), run_id)
    except (UnknownTopic, OperationalError, ProgrammingError):
        # no log beside the scores (a database holding scores only, its log tables never made): no model
        # usage to show, which is not an error of the report
        calls = []
    return summarise(calls, prompt_price, completion_price)


def _ms(value: float | None) -> str:
    return "–" if value is None else f"{value / 1000:.2f} s" if value >= 1000 else f"{value:.0f} ms"


def _n(value: float | None) -> str:
    return "–" if value is None else f"{value:,.0f}"


# The section's rows, terminal and HTML alike: label, measure, format; token sums per turn have no total
# worth reading (the per-session total is the same sum).
ROWS = (
    ("latency per call", "latency_ms_per_call", _ms, True),
    ("latency per turn", "latency_ms_per_turn", _ms, True),
    ("prompt tokens per turn", "prompt_tokens_per_turn", _n, False),
    ("completion tokens per turn", "completion_tokens_per_turn", _n, False),
    ("prompt tokens per session", "prompt_tokens_per_session", _n, True),
    ("completion tokens per session", "completion_tokens_per_session", _n, True),
)
COLUMNS = ("p50", "p95", "mean", "total")


def title(usage: ModelUsage) -> str:
    cut = "".join(f"; {n} {outcome}" for outcome, n in usage.cut.items())
    return (f"model calls: {usage.calls} in {usage.turns} turns of {usage.sessions} sessions"
            f" ({usage.retries} retries{cut})")


def rows(usage: ModelUsage) -> list[tuple[str, str, str, str, str]]:
    """Each measure formatted: label, p50, p95, mean, total ("" where no total is shown)."""
    out = []
    for label, attr, fmt, total in ROWS:
        value: Spread = getattr(usage, attr)
        shown = fmt(value.total) if total else ""
        out.append((label, fmt(value.p50), fmt(value.p95), fmt(value.mean), shown))
    return out


def cost_line(usage: ModelUsage) -> str | None:
    if usage.cost_usd is None:
        return None
    prices = usage.prices_per_million or {}
    return (f"cost: ${usage.cost_usd:,.4f} at ${prices.get('prompt', 0):g} / "
            f"${prices.get('completion', 0):g} per million prompt / completion tokens")


def usage_table(usage: ModelUsage) -> Table:
    """The terminal section: one row per measure, p50 / p95 / mean / total."""
    table = Table(title=title(usage))
    for column in ("", *COLUMNS):
        table.add_column(column, justify="left" if not column else "right")
    for row in rows(usage):
        table.add_row(*row)
    table.caption = cost_line(usage)
    return table
