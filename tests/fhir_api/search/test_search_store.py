"""Search semantics: types, prefixes, modifiers, chains, _has, includes, sort, paging, totals, errors."""

from __future__ import annotations

import pytest

from services.fhir_api.store.interface import Context, InvalidSearch, SearchRequest

SHARED = Context()


@pytest.fixture
def data(store):
    org = store.create(SHARED, {"resourceType": "Organization", "name": "Général Hospital"})
    p1 = store.create(
        SHARED,
        {
            "resourceType": "Patient",
            "name": [{"family": "Müller", "given": ["Anna"]}],
            "gender": "female",
            "birthDate": "1980-05",
            "identifier": [{"system": "urn:mrn", "value": "A1"}],
            "managingOrganization": {"reference": f"Organization/{org.id}"},
        },
    )
    p2 = store.create(
        SHARED,
        {
            "resourceType": "Patient",
            "name": [{"family": "Mull"}],
            "gender": "male",
            "birthDate": "1990-01-01",
            "identifier": [{"system": "urn:mrn", "value": "B2"}],
        },
    )
    obs = []
    for i, (code, value, when) in enumerate(
        [
            ("hgb", 10.0, "2150-01-01T10:00:00Z"),
            ("hgb", 12.5, "2150-01-02"),
            ("k", 4.1, "2150-01-03T00:00:00+02:00"),
        ]
    ):
        obs.append(
            store.create(
                SHARED,
                {
                    "resourceType": "Observation",
                    "status": "final" if i else "preliminary",
                    "code": {
                        "coding": [{"system": "urn:lab", "code": code, "display": f"Lab {code.upper()}"}]
                    },
                    "subject": {"reference": f"Patient/{p1.id}"},
                    "effectiveDateTime": when,
                    "valueQuantity": {
                        "value": value,
                        "unit": "g/dL",
                        "system": "http://unitsofmeasure.org",
                        "code": "g/dL",
                    },
                },
            )
        )
    obs.append(
        store.create(
            SHARED,
            {
                "resourceType": "Observation",
                "status": "final",
                "code": {"text": "free"},
                "subject": {"reference": f"Patient/{p2.id}"},
                "valueString": "Positive",
            },
        )
    )
    return org, p1, p2, obs


def find(store, rtype, *params, ctx=SHARED, **kw):
    return store.search(ctx, SearchRequest(rtype, list(params), **kw))


def ids(result) -> list[str]:
    return [r.id for r in result.matches]


def test_token_forms_and_modifiers(store, data) -> None:
    _, p1, p2, obs = data
    assert set(ids(find(store, "Observation", ("code", "hgb")))) == {obs[0].id, obs[1].id}
    assert set(ids(find(store, "Observation", ("code", "urn:lab|k")))) == {obs[2].id}
    assert ids(find(store, "Observation", ("code", "other|k"))) == []
    assert len(ids(find(store, "Observation", ("code", "urn:lab|")))) == 3
    assert set(ids(find(store, "Observation", ("code", "|hgb")))) == set()
    assert set(ids(find(store, "Observation", ("code:text", "lab h")))) == {obs[0].id, obs[1].id}
    assert set(ids(find(store, "Observation", ("status:not", "final")))) == {obs[0].id}
    assert set(ids(find(store, "Observation", ("status", "preliminary,final")))) == {o.id for o in obs}
    assert ids(find(store, "Observation", ("value-string:missing", "false"))) == [obs[3].id]
    assert len(ids(find(store, "Observation", ("value-string:missing", "true")))) == 3
    assert ids(find(store, "Patient", ("identifier", "urn:mrn|A1"))) == [p1.id]
    assert ids(find(store, "Patient", ("_id", p2.id))) == [p2.id]


def test_string_default_contains_exact_and_accents(store, data) -> None:
    org, p1, p2, obs = data
    assert set(ids(find(store, "Patient", ("family", "mull")))) == {p1.id, p2.id}  # ü matches u
    assert ids(find(store, "Patient", ("family:exact", "Müller"))) == [p1.id]
    assert ids(find(store, "Patient", ("family:exact", "müller"))) == []
    assert ids(find(store, "Patient", ("name:contains", "NN"))) == [p1.id]
    assert ids(find(store, "Organization", ("name", "general"))) == [org.id]
    assert ids(find(store, "Observation", ("value-string", "pos"))) == [obs[3].id]


def test_date_prefixes_with_precision_ranges(store, data) -> None:
    _, p1, p2, obs = data
    assert ids(find(store, "Patient", ("birthdate", "1980"))) == [p1.id]
    assert ids(find(store, "Patient", ("birthdate", "1980-05-10"))) == []  # month value is not inside one day
    assert ids(find(store, "Patient", ("birthdate", "ap1980-05-10"))) == [p1.id]
    assert ids(find(store, "Patient", ("birthdate", "gt1985"))) == [p2.id]
    assert ids(find(store, "Patient", ("birthdate", "lt1985"))) == [p1.id]
    assert ids(find(store, "Patient", ("birthdate", "ne1990-01-01"))) == [p1.id]
    assert ids(find(store, "Patient", ("birthdate", "sa1980-05-31"))) == [p2.id]
    assert ids(find(store, "Patient", ("birthdate", "eb1990"))) == [p1.id]
    got = ids(find(store, "Observation", ("date", "ge2150-01-02"), ("date", "le2150-01-02")))
    assert got == [obs[1].id, obs[2].id]  # 2150-01-03T00:00+02:00 is 2150-01-02T22:00Z
    assert ids(find(store, "Observation", ("date", "2150-01-01T10:00:00Z"))) == [obs[0].id]


def test_quantity_number_reference_chain_and_has(store, data) -> None:
    org, p1, p2, obs = data
    assert set(ids(find(store, "Observation", ("value-quantity", "gt10")))) == {obs[1].id}
    assert set(ids(find(store, "Observation", ("value-quantity", "ge10")))) == {obs[0].id, obs[1].id}
    assert ids(find(store, "Observation", ("value-quantity", "12.5|http://unitsofmeasure.org|g/dL"))) == [
        obs[1].id
    ]
    assert ids(find(store, "Observation", ("value-quantity", "12.5||mg"))) == []
    assert ids(find(store, "Observation", ("value-quantity", "4"))) == [obs[2].id]  # 4 covers [3.5, 4.5)
    assert ids(find(store, "Observation", ("value-quantity", "4.0"))) == []  # 4.0 covers [3.95, 4.05)
    assert set(ids(find(store, "Observation", ("subject", f"Patient/{p1.id}")))) == {
        obs[0].id,
        obs[1].id,
        obs[2].id,
    }
    assert len(ids(find(store, "Observation", ("subject:Patient", p1.id)))) == 3
    assert ids(find(store, "Observation", ("patient.identifier", "urn:mrn|B2"))) == [obs[3].id]
    assert ids(find(store, "Observation", ("subject:Patient.organization.name", "général"))) == [
        o.id for o in obs[:3]
    ]
    assert ids(find(store, "Patient", ("_has:Observation:patient:code", "k"))) == [p1.id]
    assert ids(find(store, "Patient", ("_has:Observation:patient:value-string", "pos"))) == [p2.id]


def test_includes_iterate_and_sort(store, data) -> None:
    org, p1, p2, obs = data
    res = find(store, "Observation", ("code", "k"), ("_include", "Observation:patient"))
    assert [r.id for r in res.includes] == [p1.id]
    res = find(
        store,
        "Observation",
        ("code", "k"),
        ("_include", "Observation:patient"),
        ("_include:iterate", "Patient:organization"),
    )
    assert {r.id for r in res.includes} == {p1.id, org.id}
    res = find(store, "Patient", ("_id", p2.id), ("_revinclude", "Observation:subject"))
    assert [r.id for r in res.includes] == [obs[3].id]
    res = find(store, "Patient", ("_id", p1.id), ("_include", "*"), ("_revinclude", "*"))
    assert {r.id for r in res.includes} == {org.id, obs[0].id, obs[1].id, obs[2].id}
    assert find(store, "Patient", ("_id", p1.id), ("_include", "Observation:*")).includes == []
    assert ids(find(store, "Observation", ("patient", p1.id), ("_sort", "-date"))) == [
        o.id for o in obs[2::-1]
    ]
    assert ids(find(store, "Observation", ("patient", p1.id), ("_sort", "date"))) == [o.id for o in obs[:3]]
    by_status = ids(find(store, "Observation", ("patient", p1.id), ("_sort", "status,-date")))
    assert by_status == [obs[2].id, obs[1].id, obs[0].id]


def test_paging_snapshot_and_totals(store, data) -> None:
    _, p1, _, obs = data
    first = find(store, "Observation", ("_sort", "_id"), count=2)
    assert first.has_next and first.total is None and first.snapshot is not None
    # a concurrent create does not shift the pages of the snapshot
    store.create(
        SHARED,
        {
            "resourceType": "Observation",
            "status": "final",
            "code": {"text": "new"},
            "subject": {"reference": f"Patient/{p1.id}"},
        },
    )
    second = store.search(
        SHARED, SearchRequest("Observation", [("_sort", "_id")], count=2, offset=2, snapshot=first.snapshot)
    )
    assert not second.has_next and len(second.matches) == 2
    assert set(ids(first)) | set(ids(second)) == {o.id for o in obs}
    assert find(store, "Observation", total="accurate").total == 5
    assert find(store, "Observation", total="estimate", count=0).total == 5
    assert find(store, "Observation", count=0, total="accurate").matches == []


def test_unknown_params_lenient_and_strict(store, data) -> None:
    res = find(store, "Patient", ("foo", "bar"), ("gender", "male"), ("_count", "5"))
    assert len(res.matches) == 1 and res.used_params == [("gender", "male")]
    with pytest.raises(InvalidSearch):
        find(store, "Patient", ("foo", "bar"), strict=True)
    with pytest.raises(InvalidSearch):
        find(store, "Observation", ("code-value-quantity", "x"), strict=True)  # composite: unsupported


@pytest.mark.parametrize(
    "param",
    [
        ("birthdate", "2020-13-01"),
        ("birthdate", "yesterday"),
        ("birthdate", "xx2020"),
        ("birthdate", ""),
        ("gender:below", "x"),
        ("family:oops", "x"),
        ("value-quantity", "abc"),
        ("value-quantity", "1|2"),
        ("_has:Observation", "x"),
        ("_has:Observation:nope:code", "x"),
        ("general-practitioner:foo", "1"),
        ("_sort", "nonsense"),
        ("_include", "Patient"),
        ("gender:missing", "maybe"),
        ("name.family", "x"),
    ],
)
def test_malformed_values_raise_invalid_search(store, param) -> None:
    rtype = "Observation" if param[0].startswith("value") else "Patient"
    with pytest.raises(InvalidSearch):
        find(store, rtype, param)


SQL_NASTIES = ["' OR '1'='1", "x'); DROP TABLE fhir_resource; --", "%", "_", "\\", "a|b|c", "Robert'); --"]


@pytest.mark.parametrize("nasty", SQL_NASTIES)
def test_sql_metacharacters_are_data_in_every_type(store, data, nasty) -> None:
    _, p1, _, _ = data
    for rtype, name in [
        ("Patient", "gender"),
        ("Patient", "family"),
        ("Patient", "name:contains"),
        ("Patient", "family:exact"),
        ("Patient", "_id"),
        ("Patient", "general-practitioner"),
        ("Observation", "code:text"),
        ("Observation", "_profile"),
        ("Observation", "subject"),
        ("Observation", "patient.family"),
        ("Patient", "_has:Observation:patient:code"),
    ]:
        assert find(store, rtype, (name, nasty)).matches == []
    for rtype, name in [("Patient", "birthdate"), ("Observation", "value-quantity")]:
        with pytest.raises(InvalidSearch):
            find(store, rtype, (name, nasty))
    assert ids(find(store, "Patient", ("_id", p1.id))) == [p1.id]  # tables intact


def test_meta_parameters_and_system_level_search(store, data) -> None:
    org, p1, _, _ = data
    tagged = store.create(
        SHARED,
        {
            "resourceType": "Patient",
            "meta": {"profile": ["http://example.org/p"], "tag": [{"system": "urn:t", "code": "vip"}]},
        },
    )
    assert ids(find(store, "Patient", ("_tag", "urn:t|vip"))) == [tagged.id]
    assert ids(find(store, "Patient", ("_profile", "http://example.org/p"))) == [tagged.id]
    since = tagged.last_updated.isoformat()
    assert ids(find(store, "Patient", ("_lastUpdated", f"ge{since}"))) == [tagged.id]
    assert tagged.id not in ids(find(store, "Patient", ("_lastUpdated", f"lt{since}")))
    everywhere = find(store, None, ("_id", f"{org.id},{p1.id}"))
    assert {(r.resource_type, r.id) for r in everywhere.matches} == {
        ("Organization", org.id),
        ("Patient", p1.id),
    }
    assert ids(find(store, None, ("_tag", "urn:t|vip"))) == [tagged.id]


def test_identifier_modifier_and_nested_has(store, data) -> None:
    _, p1, _, obs = data
    by_identifier = store.create(
        SHARED,
        {
            "resourceType": "Observation",
            "status": "final",
            "code": {"text": "x"},
            "subject": {"identifier": {"system": "urn:mrn", "value": "A1"}},
        },
    )
    assert ids(find(store, "Observation", ("subject:identifier", "urn:mrn|A1"))) == [by_identifier.id]
    assert ids(find(store, "Observation", ("subject:identifier", "urn:mrn|B2"))) == []
    org = data[0]
    nested = find(store, "Organization", ("_has:Patient:organization:_has:Observation:patient:code", "k"))
    assert ids(nested) == [org.id]
    assert (
        ids(find(store, "Organization", ("_has:Patient:organization:_has:Observation:patient:code", "zz")))
        == []
    )
