"""The mapper's output on the real demo is byte-identical to the output of the reference implementation
(sha256 per file, recorded before the performance work on the hot paths: tuple rows, shared fragments,
bound writers). Any change to a resource's bytes — key order, number formatting, a shared object mutated
after it was written — shows here, file by file. Patient and the microbiology test and organism files were
re-recorded when the mapping gave an in-hospital death its admissions.deathtime and a culture its store
time (`issued`): the known-time rule's part three (store/known_time.json)."""

from __future__ import annotations

import hashlib

DIGESTS = {
    "Condition": "9a8a5cf70ce2c101b88ba1424e4ce52f676c06205c57ed7671b333571d499329",
    "Encounter": "04ceda31249745fcda37db1fc8280bb80ebf93e86a274ed8938313f7456cb1e5",
    "EncounterICU": "e9861b58bfa6a37d2e1693b4f2699d64898134913d20034dcd8b2b1f24271ebd",
    "Location": "8362818728739c21c1f89eccdf7e855c1c5561cebec36f0f3ccfdf0f8ef2990e",
    "Medication": "2e99dccc5ad6a86a27d3f8b3d7381404878f12a4833ede8ba8484ba083ed31f5",
    "MedicationAdministration": "130c6492a28a37ac59c34c99c55c4d280a89890d1dadcc29917a2444394f00ed",
    "MedicationAdministrationICU": "889e2a02ec202b033b3e6d8cc6eeaafc7089132800e9ab3f88cc92818c3354f2",
    "MedicationDispense": "8b9a099bdfe8dca5c61f2ccf6905b5003bc801ef885e7ad5906058dfe9c79a1b",
    "MedicationMix": "c0270dd3f963836d6e7aa8242e5950d81ffa2eda8a7d31cb481e823b4220d925",
    "MedicationRequest": "3a0092396c4fc6d16ab3d7fe8761542ed092230f4a6d0735573a04e776d98899",
    "ObservationDatetimeevents": "2813473e186b45e0cb66adea038c8cfdf14de0dbf9f9c3c3259708789fee4a6c",
    "ObservationLabevents": "deb1fddf8c2cb35502dd0ab5d442e5b2578e0a457299040242d142b40f23b23f",
    "ObservationMicroOrg": "90066cc533e61626efc8b4aba2638d3333cdbc1b97b5302d67c48045009f1afc",
    "ObservationMicroSusc": "e2fe10be8ea6ec62a6fa919ce04278b3c4099d9ac6397579d455cdd420ba8462",
    "ObservationMicroTest": "3da7dd1ec2646527c84cd460086161652509176c2af6f07c8e54f57216dfe6f9",
    "ObservationOutputevents": "8bef948a2eda2b3110587ad68fce519e59bb480f93aac1eb047f46267cd5dc0e",
    "Organization": "57f8e53f19d6169ce79ffe36becdc6b5caac80824ec9866c205df5614db68d89",
    "Patient": "442d11aa737b19d1ad54d48c5e2151e229fe99a3aff4b2eac9e188b39392fc41",
    "Procedure": "afe865a83a3f17d363b8c775607881fe456e92b28929deb0e9d6d55a2768c4f7",
    "ProcedureICU": "9eb69e4a2d483017c9a8bf5fcf297fa4013d373da56cc8bcef62abbc008ef656",
    "Specimen": "43cfa1f2bb9be033e62d317594eecd324be2de78b14c6121ac1cd913466b4651",
    "SpecimenLab": "5889fbd34ddb2f9d2885a9140ea9a011ff6725dc6d5b440a1e680f946ad8c4e2",
}


def test_demo_output_is_byte_identical_to_the_reference(demo_run):
    out, _summary, _code = demo_run
    produced = {
        p.stem.removeprefix("Mimic"): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in out.glob("Mimic*.ndjson")
    }
    assert sorted(produced) == sorted(DIGESTS)
    changed = [name for name, digest in DIGESTS.items() if produced[name] != digest]
    assert not changed, f"output bytes changed in {changed}"
