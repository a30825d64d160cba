"""`baseline:fhir-agentbench` — the floor of a question-answering suite: reads the patient's resources of the
question's table type and answers from the latest one.

It knows only the question: the table is the first whose cue words occur in it, what is asked (yes/no, a
count, a time, else a value) the question's first words (both data: the suite's tables.json
`question_words`). It searches the patient's resources of the table's FHIR type (up to `MAX_PAGES` pages of
1,000, following `next`), then answers yes when there is any, their number, the latest one's time, or the
latest one's value; "No record." when there is none. No names, dates or windows are matched: what a
record-blind reading of the table gets right is the figure a real assistant must beat.
"""

from __future__ import annotations

from typing import Any

import httpx

from services.simulator.assistant_protocol import SessionTools, TurnRequest
from services.simulator.scenarios.fhir_agentbench.rows import tables, words

MAX_PAGES = 3


def table_of(question: str) -> str | None:
    text = question.lower()
    return next((table for table, cues in words()["tables"] if any(c in text for c in cues)), None)


def asked(question: str) -> str:
    """yes_no | count | time | value."""
    text = question.lower().lstrip()
    if text.startswith(tuple(words()["yes_no"])):
        return "yes_no"
    for kind in ("count", "time"):
        if any(cue in text for cue in words()[kind]):
            return kind
    return "value"


def path_value(resource: dict, path: str) -> Any:
    node: Any = resource
    for part in path.split("."):
        if isinstance(node, list):
            node = node[int(part)] if part.isdigit() and int(part) < len(node) else None
        elif isinstance(node, dict):
            node = node.get(part)
        else:
            return None
    return node


def first_of(resource: dict, paths: list[str]) -> Any:
    return next((v for p in paths if (v := path_value(resource, p)) not in (None, "", [])), None)


async def read_table(http: httpx.AsyncClient, table: dict, patient: str) -> list[dict]:
    search = table["search"]
    pid = patient.split("/", 1)[1]
    key = "_id" if search["type"] == "Patient" else "patient"
    url: str | None = search["type"]
    params: dict | None = {**search["params"], key: pid, "_count": "1000"}
    found: list[dict] = []
    for _ in range(MAX_PAGES):
        if url is None:
            break
        response = await http.get(url, params=params)
        if response.status_code >= 500:
            response.raise_for_status()
        if response.status_code != 200:
            break
        bundle = response.json()
        found += [e["resource"] for e in bundle.get("entry") or []  # what it includes is read, not counted
                  if e.get("resource", {}).get("resourceType") == search["type"]]
        nxt = [link["url"] for link in bundle.get("link") or [] if link.get("relation") == "next"]
        url, params = (nxt[0] if nxt else None), None
    return found


class TableBaseline:
    spec = "baseline:fhir-agentbench"

    async def respond(self, request: TurnRequest, tools: SessionTools) -> str:
        name = table_of(request.message)
        table = tables().get(name or "")
        if table is None or table["search"] is None:
            return "I cannot tell which part of the record this question is about."
        found = await read_table(tools.http, table, request.patient)
        kind = asked(request.message)
        if kind == "yes_no":
            return "Yes." if found else "No."
        if kind == "count":
            return f"{len(found)}."
        if not found:
            return "No record."
        latest = max(found, key=lambda r: str(first_of(r, table["time"]) or ""))
        value = first_of(latest, table["time"] if kind == "time" else table["latest"])
        return f"{value}." if value is not None else "No record."

    async def aclose(self) -> None:
        return None
