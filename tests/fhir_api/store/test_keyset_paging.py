"""Keyset paging (store/cursor.py): walking pages by cursor equals the one-shot result in every sort order,
forwards and backwards, and deletes or updates of other rows between two pages never skip nor repeat one."""

from __future__ import annotations

import pytest

from services.fhir_api.store import cursor
from services.fhir_api.store.interface import Context, Cursor, InvalidSearch, SearchRequest

SHARED = Context()
SORTS = ["", "-date", "date", "status,-date", "_lastUpdated", "-_id", "value-quantity", "-code,_id"]


@pytest.fixture
def observations(store) -> list[str]:
    """13 observations with repeated and missing sort keys (dates, values, codes) so ties and NULLs occur."""
    made = []
    for i in range(13):
        resource = {
            "resourceType": "Observation",
            "status": ("final", "amended", "preliminary")[i % 3],
            "code": {"coding": [{"system": "urn:lab", "code": f"c{i % 4}"}]},
            "subject": {"reference": "Patient/keyset"},
        }
        if i % 5:  # every fifth has no date: NULL sort keys come last in both directions
            resource["effectiveDateTime"] = f"2150-01-{1 + i % 6:02d}"
        if i % 4:
            resource["valueQuantity"] = {"value": float(i % 3), "unit": "g/dL"}
        made.append(store.create(SHARED, resource).id)
    return made


def _request(sort: str, count: int, **kw) -> SearchRequest:
    params = [("subject", "Patient/keyset")] + ([("_sort", sort)] if sort else [])
    return SearchRequest("Observation", params, count=count, **kw)


def _walk(store, sort: str, count: int, *, between=None) -> list[str]:
    """Every page by its next cursor; `between(page_number)` runs between two page requests."""
    page = store.search(SHARED, _request(sort, count))
    seen, number = [r.id for r in page.matches], 0
    while page.has_next:
        if between:
            between(number)
        number += 1
        request = _request(sort, count, snapshot=page.snapshot, cursor=_decoded("after", page.last_cursor))
        page = store.search(SHARED, request)
        assert page.has_previous
        seen += [r.id for r in page.matches]
    return seen


def _decoded(direction: str, text: str) -> Cursor:
    return cursor.decode(direction, text)


@pytest.mark.parametrize("sort", SORTS)
def test_walking_cursors_forwards_and_backwards_equals_the_whole_result(store, observations, sort) -> None:
    whole = [r.id for r in store.search(SHARED, _request(sort, 100)).matches]
    assert sorted(whole) == sorted(observations)
    assert _walk(store, sort, 4) == whole
    # backwards from the last page by previous cursors
    page = store.search(SHARED, _request(sort, 4))
    while page.has_next:
        page = store.search(SHARED, _request(sort, 4, cursor=_decoded("after", page.last_cursor)))
    pages = [[r.id for r in page.matches]]
    while page.has_previous:
        page = store.search(SHARED, _request(sort, 4, cursor=_decoded("before", page.first_cursor)))
        pages.insert(0, [r.id for r in page.matches])
    assert [i for p in pages for i in p] == whole
    assert all(len(p) == 4 for p in pages[:-1])  # full pages back to the first


def test_deletes_between_pages_skip_nothing_that_remains(store, observations) -> None:
    whole = [r.id for r in store.search(SHARED, _request("-date", 100)).matches]
    deleted: list[str] = []

    def delete_one_already_shown(number: int) -> None:  # an offset would shift every later row by one
        victim = whole[number * 3]
        store.delete(SHARED, "Observation", victim)
        deleted.append(victim)

    seen = _walk(store, "-date", 3, between=delete_one_already_shown)
    assert seen == whole  # each shown once; nothing that remained was skipped
    assert deleted


def test_updates_out_of_the_result_between_pages_skip_nothing(store, observations) -> None:
    whole = [r.id for r in store.search(SHARED, _request("", 100)).matches]

    def move_one_away(number: int) -> None:
        victim = whole[number * 4]  # shown on the page just served
        store.update(
            SHARED,
            "Observation",
            victim,
            {
                "resourceType": "Observation",
                "id": victim,
                "status": "final",
                "code": {"text": "moved"},
                "subject": {"reference": "Patient/elsewhere"},
            },
        )

    assert _walk(store, "", 4, between=move_one_away) == whole


@pytest.mark.parametrize(
    "values",
    [("not-a-date", 3), (1, 2, 3), ("x",)],
    ids=["wrong type", "too many keys", "too few keys"],
)
def test_a_cursor_that_does_not_fit_the_sort_is_a_client_error(store, observations, values) -> None:
    request = _request("-date", 4, cursor=Cursor("after", values))
    with pytest.raises(InvalidSearch, match="_after"):
        store.search(SHARED, request)


@pytest.mark.parametrize("text", ["%%%", "bm90IGpzb24", cursor.encode(()), "x" * 5000])
def test_a_cursor_this_server_did_not_make_is_a_client_error(text) -> None:
    with pytest.raises(InvalidSearch, match="_before"):
        cursor.decode("before", text)
