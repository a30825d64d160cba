"""One clock per patient at a time: `rounds run` never has two sessions of one patient open at different
as-of clocks, so no live token (nor any answer an assistant holds from a running session) shows that patient
at another moment than the session's own. Sessions of one patient at the same clock may run together (trials
of one scenario); a session at another clock waits until they have all ended."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import datetime


class PatientClocks:
    def __init__(self) -> None:
        self._open: dict[str, tuple[datetime, int]] = {}  # patient -> (its clock, sessions open at it)
        self._changed = asyncio.Condition()

    @asynccontextmanager
    async def hold(self, patient: str, now: datetime) -> AsyncIterator[None]:
        """Wait until `patient` has no session open at another clock than `now`, then hold it at `now`."""
        async with self._changed:
            await self._changed.wait_for(lambda: self._open.get(patient, (now, 0))[0] == now)
            self._open[patient] = (now, self._open.get(patient, (now, 0))[1] + 1)
        try:
            yield
        finally:
            async with self._changed:
                clock, count = self._open[patient]
                if count <= 1:
                    del self._open[patient]
                else:
                    self._open[patient] = (clock, count - 1)
                self._changed.notify_all()
