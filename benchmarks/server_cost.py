"""What the PostgreSQL server spent on a benchmark's requests (bench_partition.py), three ways, because each
misses something:
- CPU of the store's backends (user + system, /proc/<pid>/stat) when the server runs on this host: parsing,
  planning and execution, whatever else is on the machine (the client's CPU is measured apart);
- pg_stat_statements' planning (only with `pg_stat_statements.track_planning`) and execution time and shared
  buffers, when the extension is loaded (shared_preload_libraries) — created for the run if it is loaded but
  not installed in the database, and dropped again;
- EXPLAIN (ANALYZE, BUFFERS) of every statement a request ran (recorded by `RecordingCursor`, replayed on a
  connection with the same search_path and planner options): planning and execution time and buffers per
  statement, with no extension — a second pass, not the timed one.
The store's connections are told apart from this module's by their application_name (APP).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psycopg
from sqlalchemy.engine import make_url

from services.fhir_api.store.connections import PLANNER_OPTIONS

APP = "rounds-bench-partition"
_RECORDED: list[tuple[Any, Any]] | None = None  # the statements run while a request is replayed


class RecordingCursor(psycopg.Cursor):
    """A psycopg cursor that notes each statement it runs while `_RECORDED` is a list (the EXPLAIN pass)."""

    def execute(self, query, params=None, **kwargs):  # type: ignore[override]
        if _RECORDED is not None:
            _RECORDED.append((query, params))
        return super().execute(query, params, **kwargs)


def recorded(call: Callable[[], object]) -> list[tuple[Any, Any]]:
    """The statements `call` ran on the store's connections."""
    global _RECORDED
    _RECORDED = []
    try:
        call()
        return _RECORDED
    finally:
        _RECORDED = None


class ServerCost:
    """Server-side cost of the requests run between `start()` and `stop(n)`, per request."""

    def __init__(self, url: str, schema: str | None, timeout_ms: int = 0) -> None:
        parsed = make_url(url)
        path = f"{schema},public" if schema else "public"
        self.conn = psycopg.connect(parsed.set(drivername="postgresql").render_as_string(hide_password=False),
                                    autocommit=True, options=f"{PLANNER_OPTIONS} -c search_path={path}")
        self.timeout_ms = int(timeout_ms)  # the EXPLAIN pass's, as the store's statements have
        on_host = parsed.host in (None, "", "localhost", "127.0.0.1", "::1")
        self.local = on_host and Path("/proc/self").exists()
        self.created_pgss = False
        self.pgss = self._statements_extension()
        self.tick = os.sysconf("SC_CLK_TCK")
        self._cpu: dict[int, float] = {}
        self._pgss: tuple[float, float, float] = (0.0, 0.0, 0.0)

    def _statements_extension(self) -> bool:
        if self.conn.execute("SELECT 1 FROM pg_extension WHERE extname = 'pg_stat_statements'").fetchone():
            return True
        try:
            self.conn.execute("CREATE EXTENSION pg_stat_statements")
        except psycopg.Error:  # not in shared_preload_libraries (or no right to create it)
            return False
        self.created_pgss = True
        return True

    def _backends(self) -> dict[int, float]:
        """CPU seconds so far of each backend serving the store's connections (empty if not on this host)."""
        if not self.local:
            return {}
        pids = [row[0] for row in self.conn.execute(
            "SELECT pid FROM pg_stat_activity WHERE application_name = %s AND datname = current_database()",
            (APP,))]
        out = {}
        for pid in pids:
            try:
                fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
            except OSError:  # not on this host after all, or gone
                continue
            out[pid] = (int(fields[11]) + int(fields[12])) / self.tick  # utime, stime
        return out

    def _statements(self) -> tuple[float, float, float]:
        """pg_stat_statements' (planning ms, execution ms, shared buffers) of this database so far."""
        row = self.conn.execute(
            "SELECT coalesce(sum(total_plan_time), 0), coalesce(sum(total_exec_time), 0), "
            "coalesce(sum(shared_blks_hit + shared_blks_read), 0) FROM pg_stat_statements "
            "WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database()) "
            "AND query NOT ILIKE '%%pg_stat%%'").fetchone()
        return float(row[0]), float(row[1]), float(row[2])

    def start(self) -> None:
        self._cpu = self._backends()
        if self.pgss:
            self._pgss = self._statements()

    def stop(self, n: int) -> dict[str, float | None]:
        now = self._backends()
        spent = sum(cpu - self._cpu.get(pid, 0.0) for pid, cpu in now.items())
        out: dict[str, float | None] = {"server_cpu_ms": spent * 1e3 / n if now else None}
        if self.pgss:
            after = self._statements()
            plan, execute, buffers = (b - a for a, b in zip(self._pgss, after, strict=True))
            out |= {"pgss_plan_ms": plan / n, "pgss_exec_ms": execute / n, "pgss_buffers": buffers / n}
        return out

    def explained(self, calls: list[Callable[[], object]]) -> dict[str, float]:
        """EXPLAIN (ANALYZE, BUFFERS) of every statement each call runs: planning and execution ms and shared
        buffers (hit + read, planning's included), per call; `explain_skipped`: statements past the
        timeout."""
        plan = execute = buffers = skipped = 0.0
        self.conn.execute(f"SET statement_timeout = {self.timeout_ms}")
        for call in calls:
            for query, params in recorded(call):
                if not isinstance(query, str) or not query.lstrip().upper().startswith(("SELECT", "WITH")):
                    continue
                try:
                    found = self.conn.execute("EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) " + query, params)
                except psycopg.errors.QueryCanceled:
                    skipped += 1
                    continue
                doc = found.fetchone()[0][0]
                plan += doc.get("Planning Time", 0.0)
                execute += doc.get("Execution Time", 0.0)
                for part in (doc["Plan"], doc.get("Planning", {})):
                    buffers += part.get("Shared Hit Blocks", 0) + part.get("Shared Read Blocks", 0)
        self.conn.execute("RESET statement_timeout")
        n = len(calls) or 1
        return {"explain_plan_ms": plan / n, "explain_exec_ms": execute / n, "explain_buffers": buffers / n,
                "explain_skipped": skipped}

    def close(self) -> None:
        if self.created_pgss:
            self.conn.execute("DROP EXTENSION IF EXISTS pg_stat_statements")
        self.conn.close()
