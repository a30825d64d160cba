"""The load generator's parts for bench_fhir_api.py: a lean keep-alive HTTP/1.1 client and a meter of the CPU
spent by the client, the server's processes and the PostgreSQL backends (they all share the same cores)."""

from __future__ import annotations

import asyncio
import contextlib
import resource

import psutil
from sqlalchemy import create_engine, text


class Connection:
    """A minimal HTTP/1.1 keep-alive client on asyncio streams: sends GET, reads the status line, the headers
    and the whole body (Content-Length or chunked). The product is the server; this keeps the load
    generator's CPU per request small on a machine whose cores the server needs too."""

    def __init__(self, host: str, port: int) -> None:
        self.host, self.port = host, port
        self.reader: asyncio.StreamReader | None = None
        self.writer: asyncio.StreamWriter | None = None

    async def get(self, path: str) -> tuple[int, bytes, bytes]:
        """(status, raw header block, body) of GET path; reconnects when the server closed the connection."""
        if self.writer is None or self.writer.is_closing():
            self.reader, self.writer = await asyncio.open_connection(self.host, self.port)
        self.writer.write(f"GET {path} HTTP/1.1\r\nHost: {self.host}:{self.port}\r\n\r\n".encode())
        head = await self.reader.readuntil(b"\r\n\r\n")
        status = int(head[9:12])
        lower = head.lower()
        at = lower.find(b"\r\ncontent-length:")
        if at >= 0:
            length = int(head[at + 17 : head.index(b"\r\n", at + 2)])
            body = await self.reader.readexactly(length)
        elif b"transfer-encoding: chunked" in lower:
            body = await self._chunked()
        else:
            raise ConnectionError("response without Content-Length or chunked body")
        if b"\r\nconnection: close" in lower:
            self.close()
        return status, head, body

    async def _chunked(self) -> bytes:
        chunks = []
        while True:
            size = int((await self.reader.readuntil(b"\r\n")).split(b";")[0], 16)
            chunk = await self.reader.readexactly(size + 2)
            if not size:
                return b"".join(chunks)
            chunks.append(chunk[:-2])

    def close(self) -> None:
        if self.writer is not None:
            self.writer.close()
        self.writer = None


class CpuMeter:
    """CPU seconds (user + system) spent by this client, by the server's processes and by the PostgreSQL
    backends connected to the benchmark database (they run on the same cores)."""

    def __init__(self, server_pid: int, database_url: str) -> None:
        self.server = psutil.Process(server_pid)
        self.database_url = database_url

    def _backends(self) -> list[psutil.Process]:
        if not self.database_url.startswith("postgresql"):
            return []  # SQLite runs inside the server's processes
        engine = create_engine(self.database_url)
        with engine.connect() as conn:
            pids = conn.execute(
                text(
                    "SELECT pid FROM pg_stat_activity WHERE datname = current_database() "
                    "AND pid <> pg_backend_pid()"
                )
            ).scalars()
            found = []
            for pid in pids:
                with contextlib.suppress(psutil.Error):  # PostgreSQL on another host: CPU not measured
                    found.append(psutil.Process(pid))
        engine.dispose()
        return found

    def sample(self) -> dict[str, dict[int, tuple[float, float]]]:
        def cpu(procs: list[psutil.Process]) -> dict[int, tuple[float, float]]:
            out = {}
            for proc in procs:
                try:
                    times = proc.cpu_times()
                    out[proc.pid] = (times.user, times.system)
                except psutil.Error:
                    pass
            return out

        me = resource.getrusage(resource.RUSAGE_SELF)
        return {
            "client": {0: (me.ru_utime, me.ru_stime)},
            "server": cpu([self.server, *self.server.children(recursive=True)]),
            "postgres": cpu(self._backends()),
        }

    @staticmethod
    def spent(
        before: dict[str, dict[int, tuple[float, float]]], after: dict[str, dict[int, tuple[float, float]]]
    ) -> dict[str, tuple[float, float]]:
        """(user, kernel) CPU seconds per part between two samples (processes present in both)."""
        out = {}
        for part, now in after.items():
            common = [(t, before[part][pid]) for pid, t in now.items() if pid in before[part]]
            out[part] = (sum(t[0] - b[0] for t, b in common), sum(t[1] - b[1] for t, b in common))
        return out
