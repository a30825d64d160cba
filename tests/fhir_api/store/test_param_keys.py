"""Parameter keys (search/keys.py) lead every search index: distinct parameters must never share one."""

from __future__ import annotations

from services.fhir_api.search.extract import index_tuples
from services.fhir_api.search.keys import param_key, param_keys, stored_keys
from services.fhir_api.search.registry import params_for, resource_types


def test_every_parameter_name_has_its_own_key() -> None:
    names = [
        (rtype, name)
        for rtype in resource_types()
        for p in params_for(rtype).values()
        for name in (p.name, f"{p.name}:identifier")
    ]
    keys = {param_key(rtype, name) for rtype, name in names}
    assert len(names) > 900  # every parameter of the types the store indexes
    assert len(keys) == len(names)
    assert all(-(2**63) <= k < 2**63 for k in keys)  # fits PostgreSQL's int8


def test_rows_carry_the_key_of_their_type_and_parameter() -> None:
    obs = {
        "resourceType": "Observation",
        "status": "final",
        "code": {"coding": [{"system": "http://loinc.org", "code": "718-7"}]},
        "subject": {"reference": "Patient/p1", "identifier": {"system": "urn:mrn", "value": "42"}},
    }
    rows = index_tuples(obs)  # (param, param_key, *columns)
    by_param = {(kind, row[0]): row[1] for kind, rs in rows.items() for row in rs}
    assert by_param[("token", "code")] == param_key("Observation", "code")
    assert by_param[("token", "code")] != param_key("Condition", "code")
    assert by_param[("reference", "subject")] == param_key("Observation", "subject")
    assert by_param[("token", "subject:identifier")] == param_key("Observation", "subject:identifier")


def test_keys_of_a_parameter_across_types() -> None:
    keys = stored_keys(None, "patient")  # patient is answered by subject rows that point to a Patient
    assert (param_key("Observation", "subject"), "Patient") in keys
    assert (param_key("Condition", "subject"), "Patient") in keys
    assert len(keys) == sum("patient" in params_for(t) for t in resource_types())
    every = param_keys("Observation", "reference")
    assert param_key("Observation", "subject") in every
    assert param_key("Observation", "patient") not in every  # no rows of its own
    assert param_key("Observation", "code") not in every  # a token parameter
