"""The HTTP layer's own logic, without a store: parsing, subsetting, patching, urn:uuid resolution."""

from __future__ import annotations

from datetime import UTC, datetime

import orjson
import pytest

from services.fhir_api.http.crud import merge_patch
from services.fhir_api.http.errors import FhirHttpError
from services.fhir_api.http.params import parse_count, parse_etag, parse_instant
from services.fhir_api.http.summary import Subset, summary_table
from services.fhir_api.http.transaction import Entry, _reserve_ids, _rewrite
from services.fhir_api.http.validation import served_types


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("2150-03-04", datetime(2150, 3, 4, tzinfo=UTC)),
        ("2150", datetime(2150, 1, 1, tzinfo=UTC)),
        ("2150-03-04T05:06:07Z", datetime(2150, 3, 4, 5, 6, 7, tzinfo=UTC)),
        ("2150-03-04T05:06:07-04:00", datetime(2150, 3, 4, 9, 6, 7, tzinfo=UTC)),
    ],
)
def test_parse_instant(text, expected):
    assert parse_instant(text, "now") == expected


@pytest.mark.parametrize("bad", ["tomorrow", "2150-13-01", "21500101", "'; DROP TABLE x;--", ""])
def test_parse_instant_rejects(bad):
    with pytest.raises(FhirHttpError) as err:
        parse_instant(bad, "now")
    assert err.value.status == 400


def test_etag_and_count():
    assert parse_etag('W/"12"') == 12 and parse_etag('"3"') == 3 and parse_etag(None) is None
    with pytest.raises(FhirHttpError):
        parse_etag('W/"x"')
    assert parse_count(None) == 20 and parse_count("5000") == 1000 and parse_count("0") == 0


def test_summary_table_is_generated_from_the_spec():
    table = summary_table()
    assert len(table) > 140
    assert "effective[x]" in table["Observation"]["summary"] and "note" not in table["Observation"]["summary"]
    assert table["Observation"]["mandatory"] == ["status", "code"]
    assert {"Patient", "Observation", "Encounter"} <= served_types()


def test_subset_keeps_choice_elements_and_tags():
    raw = orjson.dumps(
        {
            "resourceType": "Observation",
            "id": "o",
            "status": "final",
            "code": {},
            "valueQuantity": {"value": 1},
            "note": [{"text": "n"}],
            "_status": {"id": "x"},
        }
    )
    out = orjson.loads(Subset.parse("true", None).apply(raw))
    assert set(out) == {"resourceType", "id", "status", "code", "valueQuantity", "_status", "meta"}
    assert out["meta"]["tag"][0]["code"] == "SUBSETTED"
    assert Subset.parse(None, None).apply(raw) is raw  # nothing asked, bytes untouched


def test_merge_patch_rfc7386():
    assert merge_patch({"a": 1, "b": {"c": 2, "d": 3}}, {"b": {"c": None, "e": 4}, "f": [1]}) == {
        "a": 1,
        "b": {"d": 3, "e": 4},
        "f": [1],
    }


def test_urn_uuid_references_are_rewritten():
    post = Entry(0, "POST", ["Patient"], [], {"resourceType": "Patient"}, "urn:uuid:p1")
    put = Entry(1, "PUT", ["Practitioner", "dr"], [], {"resourceType": "Practitioner"}, "urn:uuid:d1")
    cond = Entry(2, "POST", ["Patient"], [], {}, "urn:uuid:p2", if_none_exist=[("identifier", "x")])
    refs = _reserve_ids([post, put, cond])
    assert refs["urn:uuid:p1"] == f"Patient/{post.assigned_id}" and refs["urn:uuid:d1"] == "Practitioner/dr"
    assert "urn:uuid:p2" not in refs and cond.assigned_id is None  # known only after it runs
    obs = {
        "subject": {"reference": "urn:uuid:p1"},
        "performer": [{"reference": "urn:uuid:d1"}],
        "note": "urn:x",
    }
    assert _rewrite(obs, refs) == {
        "subject": {"reference": refs["urn:uuid:p1"]},
        "performer": [{"reference": "Practitioner/dr"}],
        "note": "urn:x",
    }
