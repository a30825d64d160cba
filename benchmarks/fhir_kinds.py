"""Request kinds of the FHIR API benchmark beyond its fixed mix (bench_fhir_api.py), each timed as a figure
of its own: `Patient/$everything` first pages and following pages, and the session search every assistant
sends for a patient's latest results (`Observation?patient=<id>&_sort=-date&_count=50` in a session).

Paths are relative to the server's root (`/fhir/...`, `/sessions/<id>/fhir/...`).
"""

from __future__ import annotations

import random
from datetime import datetime
from urllib.parse import parse_qsl, urlsplit

import httpx

FIGURES = ("everything-first", "everything-next", "session-sort")
SESSION_CLOCK = "2300-01-01T00:00:00Z"  # after every demo date: each search sees all of the patient's rows
NEXT_PAGES = 3  # following pages taken per patient


def _path(url: str) -> str:
    parts = urlsplit(url)
    return f"{parts.path}?{parts.query}" if parts.query else parts.path


def extra_work(root: str, kind: str, patients: list[str], size: int = 400) -> list[tuple[str, str]]:
    """A fixed, seeded list of (kind, path) for one of FIGURES."""
    rng = random.Random(11)
    with httpx.Client(base_url=root, timeout=600) as c:
        if kind == "everything-first":
            paths = [f"/fhir/Patient/{pid}/$everything" for pid in patients]
        elif kind == "everything-next":
            paths = []
            for pid in patients[:30]:
                page = c.get(f"/fhir/Patient/{pid}/$everything").json()
                for _ in range(NEXT_PAGES):
                    links = {x["relation"]: x["url"] for x in page.get("link", [])}
                    following = links.get("next")
                    if following is None:
                        break
                    paths.append(_path(following))
                    page = c.get(paths[-1]).json()
        elif kind == "session-sort":
            answer = c.post("/sessions", json={"now": SESSION_CLOCK})
            answer.raise_for_status()
            sid = answer.json()["id"]
            search = "Observation?patient={}&_sort=-date&_count=50"
            paths = [f"/sessions/{sid}/fhir/" + search.format(pid) for pid in patients]
        else:
            raise ValueError(f"unknown kind {kind}")
    if not paths:
        raise SystemExit(f"no requests for {kind}")
    return [(kind, rng.choice(paths)) for _ in range(size)]


def check_extra(kind: str, path: str, doc: dict) -> str | None:
    """Why an answer to one of FIGURES is wrong (None when it is right)."""
    if doc.get("resourceType") != "Bundle" or doc.get("type") != "searchset":
        return "not a searchset"
    found = [e["resource"] for e in doc.get("entry", []) if e.get("search", {}).get("mode") == "match"]
    if not found:
        return "no matches"
    if kind == "everything-first":
        pid = path.split("/")[3]
        return None if (found[0]["resourceType"], found[0]["id"]) == ("Patient", pid) else "Patient not first"
    if kind == "everything-next":
        return None if "_after=" in path else "not a following page"
    params = dict(parse_qsl(urlsplit(path).query))
    if any(r.get("subject", {}).get("reference") != f"Patient/{params['patient']}" for r in found):
        return "a match of another patient"
    when = [datetime.fromisoformat(r["effectiveDateTime"]) for r in found if "effectiveDateTime" in r]
    return None if when == sorted(when, reverse=True) else "not newest first"
