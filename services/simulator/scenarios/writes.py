"""The expected-write templates (data/writes.json), loaded once."""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path
from typing import Any

DATA = Path(__file__).parent / "data"


@cache
def write_templates() -> dict[str, Any]:
    return {
        k: v for k, v in json.loads((DATA / "writes.json").read_text(encoding="utf-8")).items() if k != "_doc"
    }
