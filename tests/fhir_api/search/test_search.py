"""Search over HTTP: paging links, result parameters, POST _search, externally visible base, $everything."""

from __future__ import annotations

from urllib.parse import parse_qsl, urlsplit

import httpx
import pytest

from tests.fhir_api.conftest import assert_outcome, observation, patient


def links(bundle: dict) -> dict[str, str]:
    return {link["relation"]: link["url"] for link in bundle.get("link", [])}


def query_of(url: str) -> list[tuple[str, str]]:
    return parse_qsl(urlsplit(url).query)


@pytest.fixture
def family(client, tag) -> str:
    """Five patients sharing a unique family name."""
    for _ in range(5):
        assert client.post("/Patient", json=patient(tag, family=f"F{tag}")).status_code == 201
    return f"F{tag}"


def test_paging_to_the_last_page_with_absolute_links(client, api, family):
    page = client.get("/Patient", params={"family": family, "_count": 2}).json()
    assert page["type"] == "searchset" and "total" not in page  # _total=none by default
    seen = []
    while True:
        seen += [e["resource"]["id"] for e in page["entry"]]
        assert all(e["search"]["mode"] == "match" for e in page["entry"])
        assert all(e["fullUrl"] == f"{api.fhir}/Patient/{e['resource']['id']}" for e in page["entry"])
        nxt = links(page).get("next")
        if not nxt:
            break
        assert nxt.startswith(api.fhir + "/Patient?")
        page = httpx.get(nxt).json()
    assert len(seen) == len(set(seen)) == 5
    assert "previous" in links(page)


def test_paging_is_stable_under_concurrent_writes(client, family, tag):
    first = client.get("/Patient", params={"family": family, "_count": 3, "_sort": "_id"}).json()
    client.post("/Patient", json=patient(tag, family=family))  # lands between the two pages
    second = httpx.get(links(first)["next"]).json()
    ids = [e["resource"]["id"] for e in first["entry"] + second["entry"]]
    assert len(ids) == len(set(ids)) == 5


def test_paging_skips_nothing_when_resources_are_deleted_or_updated_between_pages(client, family, tag):
    first = client.get("/Patient", params={"family": family, "_count": 2, "_sort": "-birthdate"}).json()
    shown = [e["resource"]["id"] for e in first["entry"]]
    assert ("_after" in links(first)["next"]) and "previous" not in links(first)
    assert client.delete(f"/Patient/{shown[0]}").status_code in (200, 204)  # an offset would skip one now
    page, seen = first, list(shown)
    while "next" in links(page):
        page = httpx.get(links(page)["next"]).json()
        seen += [e["resource"]["id"] for e in page.get("entry", [])]
        if len(seen) == 4:  # an update moving a shown one out of the result does not shift the rest either
            moved = patient(tag, family="Elsewhere")
            moved["id"] = seen[2]
            assert client.put(f"/Patient/{seen[2]}", json=moved).status_code == 200
    assert len(seen) == len(set(seen)) == 5
    back = httpx.get(links(page)["previous"]).json()  # the two before the last one, as the result is now
    assert [e["resource"]["id"] for e in back["entry"]] == [seen[1], seen[3]]  # seen[0] gone, seen[2] moved


def test_malformed_or_foreign_paging_cursors_are_client_errors(client, family):
    import base64

    from services.fhir_api.store import cursor

    for params in (
        {"_after": "%%%"},
        {"_before": cursor.encode(("a date?", 1)), "_sort": "birthdate"},
        {"_after": cursor.encode((1, 2, 3))},
        {"_after": cursor.encode((1,)), "_before": cursor.encode((1,))},
        {"_after": cursor.encode((2**63 - 1,))},  # beyond what rids are: refused before the database sees it
        {"_after": base64.urlsafe_b64encode(b"[10000000000000000000000000]").decode()},
        {"_after": cursor.encode(("nul\x00", 1)), "_sort": "family"},
        {"_after": cursor.encode((1.5, 1)), "_sort": "_id"},  # a number where the sort key is text
    ):
        assert_outcome(client.get("/Patient", params={"family": family, **params}), 400)


def test_self_link_lists_only_applied_params(client, family):
    bundle = client.get("/Patient", params={"family": family, "bogus": "1", "_sort": "-_lastUpdated"}).json()
    names = [k for k, _ in query_of(links(bundle)["self"])]
    assert "family" in names and "_sort" in names and "bogus" not in names


def test_strict_handling_rejects_unknown_params(client, family):
    strict = client.get(
        "/Patient", params={"family": family, "bogus": "1"}, headers={"Prefer": "handling=strict"}
    )
    assert_outcome(strict, 400)
    lenient = client.get(
        "/Patient", params={"family": family, "bogus": "1"}, headers={"Prefer": "handling=lenient"}
    )
    assert lenient.status_code == 200 and len(lenient.json()["entry"]) == 5


def test_count_default_max_and_zero(client, family):
    assert links(client.get("/Patient", params={"family": family}).json())["self"].endswith("_count=20")
    capped = client.get("/Patient", params={"family": family, "_count": 5000}).json()
    assert ("_count", "1000") in query_of(links(capped)["self"])
    only_total = client.get("/Patient", params={"family": family, "_count": 0}).json()
    assert only_total["total"] == 5 and "entry" not in only_total
    assert_outcome(client.get("/Patient", params={"_count": "ten"}), 400)
    assert_outcome(client.get("/Patient", params={"_count": "-1"}), 400)


def test_total_modes(client, family):
    assert client.get("/Patient", params={"family": family, "_total": "accurate"}).json()["total"] == 5
    assert "total" not in client.get("/Patient", params={"family": family, "_total": "none"}).json()
    estimate = client.get("/Patient", params={"family": family, "_total": "estimate"}).json()
    assert estimate.get("total", 5) >= 5
    assert_outcome(client.get("/Patient", params={"_total": "maybe"}), 400)
    fhirpy_count = client.get("/Patient", params={"family": family, "_count": 0, "_totalMethod": "count"})
    assert fhirpy_count.json()["total"] == 5


def test_summary_and_elements(client, family):
    count = client.get("/Patient", params={"family": family, "_summary": "count"}).json()
    assert count["total"] == 5 and "entry" not in count
    summary = client.get("/Patient", params={"family": family, "_summary": "true"}).json()
    resource = summary["entry"][0]["resource"]
    assert {"name", "identifier", "gender"} <= set(resource)
    assert any(t["code"] == "SUBSETTED" for t in resource["meta"]["tag"])
    elements = client.get("/Patient", params={"family": family, "_elements": "gender"}).json()
    resource = elements["entry"][0]["resource"]
    assert resource["gender"] and "name" not in resource and resource["id"]
    assert_outcome(client.get("/Patient", params={"_summary": "everything"}), 400)


def test_summary_on_read(client, tag):
    pid = client.post(
        "/Patient", json={**patient(tag), "text": {"status": "generated", "div": "<div/>"}}
    ).json()["id"]
    data = client.get(f"/Patient/{pid}", params={"_summary": "data"}).json()
    assert "text" not in data and data["name"]
    text = client.get(f"/Patient/{pid}", params={"_summary": "text"}).json()
    assert text["text"] and "name" not in text


def test_post_search_with_form_body(client, family):
    r = client.post("/Patient/_search", data={"family": family, "_count": "2"})
    assert r.status_code == 200 and len(r.json()["entry"]) == 2
    assert "next" in links(r.json())
    wrong = client.post(
        "/Patient/_search", content=b'{"family": "x"}', headers={"Content-Type": "application/json"}
    )
    assert_outcome(wrong, 415)


def test_links_follow_configured_base_url(client, api, family):
    settings = api.app.state.settings
    api.app.state.settings = settings.model_copy(update={"base_url": "https://public.example/ehr"})
    try:
        bundle = client.get("/Patient", params={"family": family, "_count": 2}).json()
    finally:
        api.app.state.settings = settings
    assert links(bundle)["next"].startswith("https://public.example/ehr/fhir/Patient?")


def test_include_entries_are_marked(client, tag):
    pid = client.post("/Patient", json=patient(tag)).json()["id"]
    client.post("/Observation", json=observation(pid, f"c-{tag}", "2150-01-01T00:00:00Z"))
    bundle = client.get(
        "/Observation", params={"code": f"http://loinc.org|c-{tag}", "_include": "Observation:subject"}
    ).json()
    modes = {e["resource"]["resourceType"]: e["search"]["mode"] for e in bundle["entry"]}
    assert modes == {"Observation": "match", "Patient": "include"}


def test_everything_is_paged_and_filtered(client, api, tag):
    pid = client.post("/Patient", json=patient(tag)).json()["id"]
    for i in range(3):
        client.post("/Observation", json=observation(pid, f"e-{tag}", f"2150-01-0{i + 1}T00:00:00Z"))
    first = client.get(f"/Patient/{pid}/$everything", params={"_count": 2}).json()
    assert first["type"] == "searchset" and len(first["entry"]) == 2
    nxt = links(first)["next"]
    assert nxt.startswith(f"{api.fhir}/Patient/{pid}/$everything?")
    rest = httpx.get(nxt).json()
    ids = {e["resource"]["id"] for e in first["entry"] + rest["entry"]}
    assert len(ids) == 4
    only_obs = client.get(f"/Patient/{pid}/$everything", params={"_type": "Observation"}).json()
    modes = {(e["resource"]["resourceType"], e["search"]["mode"]) for e in only_obs["entry"]}
    assert modes == {("Observation", "match"), ("Patient", "include")}  # what the matches refer to
    assert_outcome(client.get(f"/Patient/{pid}/$everything", params={"_type": "Nope"}), 404)
    assert_outcome(client.get(f"/Patient/{pid}/$everything", params={"_since": "soon"}), 400)
    assert_outcome(client.get(f"/Observation/{pid}/$everything"), 404)


def test_everything_counts_its_total_only_when_asked(client, tag):
    pid = client.post("/Patient", json=patient(tag)).json()["id"]
    for i in range(3):
        client.post("/Observation", json=observation(pid, f"t-{tag}", f"2150-03-0{i + 1}T00:00:00Z"))
    plain = client.get(f"/Patient/{pid}/$everything", params={"_count": 2}).json()
    assert "total" not in plain and len(plain["entry"]) == 2
    assert "_snapshot=" in links(plain)["next"]  # later pages walk the first page's record
    counted = client.get(f"/Patient/{pid}/$everything", params={"_count": 2, "_total": "accurate"}).json()
    assert counted["total"] == 4 and "_total=accurate" in links(counted)["next"]
    assert httpx.get(links(counted)["next"]).json()["total"] == 4
    summary = client.get(f"/Patient/{pid}/$everything", params={"_summary": "count"}).json()
    assert summary.get("total") == 4
    assert_outcome(client.get(f"/Patient/{pid}/$everything", params={"_total": "lots"}), 400)


def test_everything_pages_skip_nothing_when_resources_are_deleted_between_pages(client, tag):
    pid = client.post("/Patient", json=patient(tag)).json()["id"]
    for i in range(5):
        client.post("/Observation", json=observation(pid, f"d-{tag}", f"2150-02-0{i + 1}T00:00:00Z"))
    first = client.get(f"/Patient/{pid}/$everything", params={"_count": 2}).json()
    shown = [(e["resource"]["resourceType"], e["resource"]["id"]) for e in first["entry"]]
    assert shown[0] == ("Patient", pid) and "_after=" in links(first)["next"]
    assert client.delete(f"/Observation/{shown[1][1]}").status_code in (200, 204)  # offsets would shift now
    page, seen = first, [i for _, i in shown]
    while "next" in links(page):
        page = httpx.get(links(page)["next"]).json()
        seen += [e["resource"]["id"] for e in page.get("entry", [])]
    assert len(seen) == len(set(seen)) == 6
    back = httpx.get(links(page)["previous"]).json()
    assert [e["resource"]["id"] for e in back["entry"]] == seen[2:4]  # the page before the last, as it is now
