"""`RetryLater`: a handler's way to say "not now" (a judge timed out, a FHIR read failed) instead of "never".

Any other exception a projection raises marks the event as poison: it is isolated and dead-lettered so it
never blocks the stream. `RetryLater` is the opposite: the batch's transaction rolls back (its rows and
emitted events with it), nothing is dead-lettered, the consumer goes back to the stored positions and polls
the same events again after a backoff. The partitions of the batch wait meanwhile: events of one session
stay in order.
"""

from __future__ import annotations

from dataclasses import dataclass, field


class RetryLater(Exception):  # noqa: N818 - an instruction to the runner, not an error condition
    """Raise from `prefetch`, `prepare`, `handle` or `finish` to retry the batch later; never dead-lettered.

    `delay_s` asks for at least that long before the next attempt (capped by the runner's `Backoff.max_s`);
    without it the runner's exponential backoff decides."""

    def __init__(self, reason: str = "", *, delay_s: float | None = None) -> None:
        super().__init__(reason)
        self.delay_s = delay_s


@dataclass
class Backoff:
    """Exponential backoff between consecutive retries of a batch: initial_s, then x factor, at most max_s.

    The maximum stays below the SQL log's member session timeout (10 s) and Kafka's poll interval limit, so a
    consumer waiting to retry keeps its partitions."""

    initial_s: float = 0.2
    factor: float = 2.0
    max_s: float = 5.0
    _next: float = field(default=0.0, init=False, repr=False)

    def delay(self, requested_s: float | None = None) -> float:
        """The wait before the next attempt (grows with each consecutive call until `reset`)."""
        current = self._next or self.initial_s
        self._next = min(self.max_s, current * self.factor)
        if requested_s is not None:
            current = max(current, requested_s)
        return min(self.max_s, current)

    def reset(self) -> None:
        """A batch committed: the next retry starts from `initial_s` again."""
        self._next = 0.0
