"""Writing and reading scenario files: one session per JSONL line plus FILE.summary.json.

Both are written to a temporary file beside the target and renamed into place only once complete, so an
interrupted build leaves either the previous files or none — never a truncated file that looks finished.
Lines are the canonical JSON of the Scenario model (nulls omitted), so the same sessions give the same
bytes."""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from contracts.scenario import Scenario


def line(scenario: Scenario) -> str:
    return scenario.model_dump_json(exclude_none=True)


def summary_path(out: Path) -> Path:
    return out.with_name(out.name.removesuffix(".jsonl") + ".summary.json")


def _atomic(path: Path, chunks: Iterable[str]) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}.partial")
    try:
        with tmp.open("w", encoding="utf-8", newline="\n") as fh:
            for chunk in chunks:
                fh.write(chunk)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


def write(out: Path, scenarios: list[Scenario], summary: dict[str, Any]) -> None:
    """The sessions file, then its summary (the summary's presence means the build finished)."""
    out.parent.mkdir(parents=True, exist_ok=True)
    _atomic(out, (line(s) + "\n" for s in scenarios))
    _atomic(summary_path(out), [json.dumps(summary, ensure_ascii=False, indent=1) + "\n"])


def read(path: Path) -> Iterator[Scenario]:
    with path.open(encoding="utf-8") as fh:
        for number, text in enumerate(fh, 1):
            if text.strip():
                try:
                    yield Scenario.model_validate_json(text)
                except ValueError as exc:
                    raise ValueError(f"{path}:{number}: not a scenario line: {exc}") from exc
