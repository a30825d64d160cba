"""Schemathesis over the FHIR API's complete OpenAPI document, many cases, on SQLite and PostgreSQL.

    python benchmarks/bench_schemathesis.py                  # 20 cases per operation and way, both databases
    python benchmarks/bench_schemathesis.py --examples 40 --database-url postgresql+psycopg://.../postgres
    python benchmarks/bench_schemathesis.py --auth           # ROUNDS_AUTH=on: 401/403 answers too

The same run as tests/fhir_api/test_schemathesis.py (free, negative, aimed-at-what-exists cases; checks: no
server error, documented status, media type and body schema), at a size CI does not afford. Without
--database-url a throwaway PostgreSQL is started with scripts/postgres.sh. Prints, per database: cases, server
errors, responses outside the document, statuses seen, seconds; then the first failures if any.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

from sqlalchemy import create_engine, text

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from tests.fhir_api.test_schemathesis import run_schemathesis  # noqa: E402


def _admin(server_url: str, statement: str) -> None:
    engine = create_engine(server_url, isolation_level="AUTOCOMMIT")
    with engine.connect() as conn:
        conn.execute(text(statement))
    engine.dispose()


def measure(label: str, database_url: str, examples: int, auth: bool) -> bool:
    started = time.perf_counter()
    figures = run_schemathesis(database_url, examples, auth=auth)
    label += " (access control on)" if auth else ""
    print(f"{label}: {figures.summary()}; {time.perf_counter() - started:.0f} s", flush=True)
    for failure in (figures.server_errors + figures.nonconforming)[:10]:
        print(f"  {failure}")
    return not (figures.server_errors or figures.nonconforming)


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--examples", type=int, default=20, help="cases per operation and way (default 20)")
    parser.add_argument("--database-url", help="a PostgreSQL server URL (a fresh database is made on it)")
    parser.add_argument("--skip-sqlite", action="store_true")
    parser.add_argument("--auth", action="store_true", help="with access control on (tokens: none, managing, "
                        "the session's, patient-confined)")
    args = parser.parse_args()
    ok = True
    with tempfile.TemporaryDirectory() as folder:
        tmp = Path(folder)
        if not args.skip_sqlite:
            ok &= measure("SQLite", f"sqlite:///{tmp / 'rounds.sqlite'}", args.examples, args.auth)
        env = {"PG_STATE_FILE": str(tmp / "pg-state")}
        server_url = args.database_url
        if server_url is None:
            out = subprocess.run([str(REPO / "scripts" / "postgres.sh"), "start"], env={**os.environ, **env},
                                 capture_output=True, text=True, check=True).stdout
            server_url = re.search(r"DATABASE_URL=(\S+)", out).group(1)
        name = f"bench_st_{uuid.uuid4().hex[:8]}"
        _admin(server_url, f'CREATE DATABASE "{name}"')
        try:
            ok &= measure("PostgreSQL", f"{server_url.rpartition('/')[0]}/{name}", args.examples, args.auth)
        finally:
            _admin(server_url, f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
            if args.database_url is None:
                subprocess.run([str(REPO / "scripts" / "postgres.sh"), "stop"],
                               env={**os.environ, **env}, capture_output=True, check=False)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
