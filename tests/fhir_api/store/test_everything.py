"""Patient/$everything: keyset pages that are stable and add up to the unpaged walk, the
total only when asked, and every reference in the result resolvable within it -- two steps away too (the
ingredient Medications of a mix a MedicationRequest points to; the Location a ward is part of and the
Organizations above it).
"""

from __future__ import annotations

from collections.abc import Iterator

import orjson
import pytest

from services.fhir_api.store import cursor
from services.fhir_api.store.interface import Context, SearchResult, StoredResource

SHARED = Context()


def _ref(kind: str, id: str) -> dict:
    return {"reference": f"{kind}/{id}"}


@pytest.fixture
def record(store) -> dict[str, str]:
    """A patient with admissions, labs, orders of a mix, and what they refer to outside the compartment;
    another patient with resources of their own."""
    ids: dict[str, str] = {}

    def put(name: str, resource: dict) -> str:
        ids[name] = store.create(SHARED, resource).id
        return ids[name]

    put("org-parent", {"resourceType": "Organization", "name": "health system"})
    put(
        "org",
        {
            "resourceType": "Organization",
            "name": "hospital",
            "partOf": _ref("Organization", ids["org-parent"]),
        },
    )
    put(
        "building",
        {
            "resourceType": "Location",
            "name": "east",
            "managingOrganization": _ref("Organization", ids["org"]),
        },
    )
    put("ward", {"resourceType": "Location", "name": "ward 4", "partOf": _ref("Location", ids["building"])})
    put("doctor", {"resourceType": "Practitioner", "name": [{"family": "Grey"}]})
    put("patient", {"resourceType": "Patient", "managingOrganization": _ref("Organization", ids["org"])})
    put("other", {"resourceType": "Patient"})
    pid = ids["patient"]
    put(
        "stay",
        {
            "resourceType": "Encounter",
            "status": "finished",
            "class": {"code": "IMP"},
            "subject": _ref("Patient", pid),
        },
    )
    put(
        "icu",
        {
            "resourceType": "Encounter",
            "status": "finished",
            "class": {"code": "ACUTE"},
            "subject": _ref("Patient", pid),
            "partOf": _ref("Encounter", ids["stay"]),
            "serviceProvider": _ref("Organization", ids["org"]),
            "location": [{"location": _ref("Location", ids["ward"])}],
        },
    )
    for n in ("saline", "kcl"):
        put(n, {"resourceType": "Medication", "code": {"text": n}})
    put(
        "mix",
        {
            "resourceType": "Medication",
            "code": {"text": "kcl in saline"},
            "ingredient": [{"itemReference": _ref("Medication", ids[n])} for n in ("saline", "kcl")],
        },
    )
    put(
        "order",
        {
            "resourceType": "MedicationRequest",
            "status": "active",
            "intent": "order",
            "subject": _ref("Patient", pid),
            "encounter": _ref("Encounter", ids["icu"]),
            "medicationReference": _ref("Medication", ids["mix"]),
            "authoredOn": "2150-01-02T08:00:00Z",
        },
    )
    put("specimen", {"resourceType": "Specimen", "subject": _ref("Patient", pid)})
    for i in range(23):
        put(
            f"lab{i}",
            {
                "resourceType": "Observation",
                "status": "final",
                "code": {"text": f"lab {i % 4}"},
                "subject": _ref("Patient", pid),
                "encounter": _ref("Encounter", ids["stay" if i % 2 else "icu"]),
                "specimen": _ref("Specimen", ids["specimen"]),
                "performer": [_ref("Practitioner", ids["doctor"]), _ref("Patient", pid)],  # twice a member
                "effectiveDateTime": f"2150-01-{1 + i % 9:02d}T10:00:00Z",
            },
        )
    put(
        "given",
        {
            "resourceType": "MedicationAdministration",
            "status": "completed",
            "subject": _ref("Patient", pid),
            "request": _ref("MedicationRequest", ids["order"]),
            "medicationReference": _ref("Medication", ids["mix"]),
            "effectiveDateTime": "2150-01-02T09:00:00Z",
        },
    )
    put(
        "theirs",
        {
            "resourceType": "Observation",
            "status": "final",
            "code": {"text": "x"},
            "subject": _ref("Patient", ids["other"]),
        },
    )
    return ids


def _lab(pid: str, text: str) -> dict:
    return {
        "resourceType": "Observation",
        "status": "final",
        "code": {"text": text},
        "subject": _ref("Patient", pid),
    }


def _walk(store, ctx: Context, pid: str, count: int, **kw) -> Iterator[SearchResult]:
    """Every page of the walk, following the next cursor with the first page's snapshot."""
    page = store.everything(ctx, pid, count=count, **kw)
    yield page
    while page.has_next:
        at = cursor.decode("after", page.last_cursor)
        page = store.everything(ctx, pid, count=count, cursor=at, snapshot=page.snapshot, **kw)
        yield page


def _keys(resources: list[StoredResource]) -> list[tuple[str, str]]:
    return [(r.resource_type, r.id) for r in resources]


def _references(resource: StoredResource) -> set[str]:
    found: set[str] = set()

    def visit(node) -> None:
        if isinstance(node, dict):
            if isinstance(node.get("reference"), str):
                found.add(node["reference"])
            for value in node.values():
                visit(value)
        elif isinstance(node, list):
            for value in node:
                visit(value)

    visit(orjson.loads(resource.raw))
    return found


def test_pages_add_up_to_the_unpaged_walk_without_repeats(store, record) -> None:
    pid = record["patient"]
    whole = store.everything(SHARED, pid, count=1000)
    members = {"patient", "stay", "icu", "order", "specimen", "given", *(f"lab{i}" for i in range(23))}
    assert not whole.has_next and whole.matches[0].id == pid
    assert sorted(r.id for r in whole.matches) == sorted(record[n] for n in members)
    for count in (1, 4, 7):
        pages = list(_walk(store, SHARED, pid, count))
        assert all(len(p.matches) <= count for p in pages) and not pages[-1].has_next
        walked = [key for p in pages for key in _keys(p.matches)]
        assert walked == _keys(whole.matches)  # same order, nothing twice, nothing missing
    assert record["theirs"] not in {r.id for r in whole.matches}


def test_pages_stay_stable_when_the_compartment_changes_between_requests(store, record) -> None:
    pid = record["patient"]
    before = _keys(store.everything(SHARED, pid, count=1000).matches)
    first = store.everything(SHARED, pid, count=5)
    shown = _keys(first.matches)
    gone = before[8]  # on a later page
    store.delete(SHARED, *gone)
    added = store.create(SHARED, _lab(pid, "late"))
    page, walked = first, list(shown)
    while page.has_next:
        at = cursor.decode("after", page.last_cursor)
        page = store.everything(SHARED, pid, count=5, cursor=at, snapshot=page.snapshot)
        walked += _keys(page.matches)
    assert walked == [key for key in before if key != gone]  # nothing shifted, repeated or dropped
    assert ("Observation", added.id) not in walked  # created after the first page: not in this walk
    assert ("Observation", added.id) in _keys(store.everything(SHARED, pid, count=1000).matches)
    # a page before a cursor is the walk's preceding page, as it is now
    third = list(_walk(store, SHARED, pid, 5))[2]
    back = store.everything(SHARED, pid, count=5, cursor=cursor.decode("before", third.first_cursor))
    assert _keys(back.matches) == [k for k in before if k != gone][5:10]


def test_every_reference_resolves_within_the_walk_and_outside_ones_within_the_page(store, record) -> None:
    pid = record["patient"]
    pages = list(_walk(store, SHARED, pid, 4))
    returned = {f"{t}/{i}" for p in pages for t, i in _keys(p.matches + p.includes)}
    matches = {f"{t}/{i}" for p in pages for t, i in _keys(p.matches)}
    for page in pages:
        here = {f"{t}/{i}" for t, i in _keys(page.matches + page.includes)}
        for resource in page.matches + page.includes:
            for reference in _references(resource):
                assert reference in returned, (resource.resource_type, reference)
                # what the walk does not deliver as a match comes along with the page that refers to it
                assert reference in matches or reference in here, (resource.resource_type, reference)
        assert not set(_keys(page.includes)) & set(_keys(page.matches))
    included = {f"{t}/{i}" for p in pages for t, i in _keys(p.includes)}
    two_steps = (
        "saline",
        "kcl",
        "org-parent",
        "building",
    )  # mix -> ingredients, ward -> building -> org -> parent
    assert {
        f"{kind}/{record[n]}"
        for kind, n in zip(("Medication",) * 2 + ("Organization", "Location"), two_steps, strict=True)
    } <= included
    assert f"Patient/{record['other']}" not in returned


def test_a_type_filter_brings_the_members_it_leaves_out_along_as_includes(store, record) -> None:
    pid = record["patient"]
    page = store.everything(SHARED, pid, types=["Observation"], count=1000)
    assert {r.resource_type for r in page.matches} == {"Observation"} and len(page.matches) == 23
    included = set(_keys(page.includes))
    assert {
        ("Encounter", record["stay"]),
        ("Encounter", record["icu"]),
        ("Specimen", record["specimen"]),
    } <= included
    assert ("Patient", pid) in included and ("Location", record["ward"]) in included  # via the ICU stay


def test_the_total_is_counted_only_when_asked(store, record) -> None:
    pid = record["patient"]
    assert store.everything(SHARED, pid, count=5).total is None
    assert store.everything(SHARED, pid, count=5, total="accurate").total == 29
    assert store.everything(SHARED, pid, count=5, total="estimate").total == 29
    assert store.everything(SHARED, pid, count=0, total="accurate").total == 29
    assert store.everything(SHARED, pid, types=["Encounter"], count=5, total="accurate").total == 2


def test_a_session_walks_its_own_view(store, record) -> None:
    pid = record["patient"]
    ctx = store.get_session(store.create_session(None))
    own = store.create(ctx, _lab(pid, "mine"))
    store.delete(ctx, "Observation", record["lab3"])
    store.update(
        ctx, "Location", record["ward"], {"resourceType": "Location", "id": record["ward"], "name": "moved"}
    )
    pages = list(_walk(store, ctx, pid, 6))
    walked = [k for p in pages for k in _keys(p.matches)]
    assert ("Observation", own.id) in walked and ("Observation", record["lab3"]) not in walked
    assert len(walked) == len(set(walked)) == 29
    assert pages[0].total is None
    included = {(r.resource_type, r.id): r for p in pages for r in p.includes}
    ward = included[("Location", record["ward"])]
    assert orjson.loads(ward.raw)["name"] == "moved"  # the session's version, and nothing above it any more
    assert ("Location", record["building"]) not in included
    assert own.id not in {r.id for r in store.everything(SHARED, pid, count=1000).matches}
