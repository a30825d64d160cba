"""Property-style invariants over a generated set: every row of every patient obeys them."""

from __future__ import annotations

import json
from collections import defaultdict
from datetime import timedelta
from pathlib import Path

from fhir_mapper.synth.catalog import DATA
from fhir_mapper.synth.context import ID_BLOCKS
from tests.fhir_mapper.synth.conftest import rows, ts


def _by(root: Path, table: str, key: str) -> dict[str, dict[str, str]]:
    return {r[key]: r for r in rows(root, table)}


def test_admissions_lie_inside_the_lifetime_and_do_not_overlap(synth_dir: Path) -> None:
    patients = _by(synth_dir, "hosp/patients", "subject_id")
    per_subject = defaultdict(list)
    for adm in rows(synth_dir, "hosp/admissions"):
        per_subject[adm["subject_id"]].append(adm)
        patient = patients[adm["subject_id"]]
        age = int(patient["anchor_age"]) + ts(adm["admittime"]).year - int(patient["anchor_year"])
        assert 18 <= age <= 120
        assert ts(adm["admittime"]) < ts(adm["dischtime"])
        if adm["deathtime"]:
            assert adm["hospital_expire_flag"] == "1" and adm["discharge_location"] == "DIED"
            assert patient["dod"] == adm["deathtime"][:10]
        else:
            assert adm["hospital_expire_flag"] == "0"
    deaths = 0
    for subject, adms in per_subject.items():
        adms.sort(key=lambda a: a["admittime"])
        for before, after in zip(adms, adms[1:], strict=False):
            assert before["dischtime"] < after["admittime"]
        dod = patients[subject]["dod"]
        if dod:
            deaths += 1
            assert dod >= adms[-1]["dischtime"][:10]
    assert deaths > 0 and set(per_subject) == set(patients)


def test_transfers_icu_and_ed_stays_fit_their_admissions(synth_dir: Path) -> None:
    admissions = _by(synth_dir, "hosp/admissions", "hadm_id")
    units = defaultdict(list)
    ed_only = {
        (e["subject_id"], e["intime"], e["outtime"])
        for e in rows(synth_dir, "ed/edstays")
        if not e["hadm_id"]
    }
    unadmitted = 0
    for t in rows(synth_dir, "hosp/transfers"):
        if not t["hadm_id"]:
            assert t["eventtype"] == "ED" and (t["subject_id"], t["intime"], t["outtime"]) in ed_only
            unadmitted += 1
            continue
        adm = admissions[t["hadm_id"]]
        if t["eventtype"] == "ED":
            assert (t["intime"], t["outtime"]) == (adm["edregtime"], adm["edouttime"])
        elif t["eventtype"] == "discharge":
            assert t["intime"] == adm["dischtime"] and not t["careunit"] and not t["outtime"]
        else:
            assert t["eventtype"] in ("admit", "transfer") and t["careunit"]
            assert adm["admittime"] <= t["intime"] < t["outtime"] <= adm["dischtime"]
            units[t["hadm_id"]].append((t["careunit"], t["intime"], t["outtime"]))
    stays = list(rows(synth_dir, "icu/icustays"))
    assert stays
    for stay in stays:
        adm = admissions[stay["hadm_id"]]
        assert stay["subject_id"] == adm["subject_id"]
        assert adm["admittime"] <= stay["intime"] < stay["outtime"] <= adm["dischtime"]
        assert (stay["first_careunit"], stay["intime"], stay["outtime"]) in units[stay["hadm_id"]]
        los = (ts(stay["outtime"]) - ts(stay["intime"])).total_seconds() / 86400
        assert abs(float(stay["los"]) - los) < 1e-5
    ed_admitted = 0
    for ed in rows(synth_dir, "ed/edstays"):
        assert ed["intime"] < ed["outtime"]
        if ed["hadm_id"]:
            ed_admitted += 1
            adm = admissions[ed["hadm_id"]]
            assert (ed["intime"], ed["outtime"]) == (adm["edregtime"], adm["edouttime"])
            assert ed["intime"] < adm["admittime"] <= ed["outtime"] and ed["disposition"] == "ADMITTED"
        else:
            assert ed["disposition"] != "ADMITTED"
    assert ed_admitted == sum(1 for a in admissions.values() if a["edregtime"])
    assert unadmitted == len(ed_only) > 0


def test_labs_lie_in_their_admission_and_flags_agree_with_ranges(synth_dir: Path) -> None:
    admissions = _by(synth_dir, "hosp/admissions", "hadm_id")
    specimens: dict[str, tuple[str, str]] = {}
    outpatient = abnormal = 0
    for lab in rows(synth_dir, "hosp/labevents"):
        if lab["hadm_id"]:
            adm = admissions[lab["hadm_id"]]
            assert adm["subject_id"] == lab["subject_id"]
            assert adm["admittime"] <= lab["charttime"] < adm["dischtime"]
        else:
            outpatient += 1
        assert lab["charttime"] < lab["storetime"]
        assert specimens.setdefault(lab["specimen_id"], (lab["subject_id"], lab["charttime"])) == (
            lab["subject_id"],
            lab["charttime"],
        )
        value = float(lab["valuenum"])
        assert lab["value"] == lab["valuenum"]
        if lab["ref_range_lower"]:
            outside = not float(lab["ref_range_lower"]) <= value <= float(lab["ref_range_upper"])
            assert (lab["flag"] == "abnormal") == outside, lab
            abnormal += outside
        else:
            assert lab["flag"] == ""
    assert outpatient > 0 and abnormal > 0


def test_icu_events_lie_in_their_stays(synth_dir: Path) -> None:
    stays = _by(synth_dir, "icu/icustays", "stay_id")
    for table, time_columns in (
        ("icu/chartevents", ["charttime"]),
        ("icu/outputevents", ["charttime"]),
        ("icu/datetimeevents", ["charttime", "value"]),
        ("icu/inputevents", ["starttime", "endtime"]),
        ("icu/ingredientevents", ["starttime", "endtime"]),
        ("icu/procedureevents", ["starttime", "endtime"]),
    ):
        count = 0
        for event in rows(synth_dir, table):
            count += 1
            stay = stays[event["stay_id"]]
            assert (event["subject_id"], event["hadm_id"]) == (stay["subject_id"], stay["hadm_id"])
            for column in time_columns:
                assert stay["intime"] <= event[column] <= stay["outtime"], (table, column, event)
        assert count > 0, table
    vitals = [r for r in rows(synth_dir, "icu/chartevents") if r["itemid"] == "220045"]
    rates = [float(r["valuenum"]) for r in vitals]
    assert 60 < sum(rates) / len(rates) < 110
    assert all((r["warning"] == "1") == (not 50 <= float(r["valuenum"]) <= 120) for r in vitals)


def test_orders_share_ids_and_emar_follows_the_prescription_window(synth_dir: Path) -> None:
    pharmacy = _by(synth_dir, "hosp/pharmacy", "pharmacy_id")
    poe = _by(synth_dir, "hosp/poe", "poe_id")
    prescriptions = {
        r["pharmacy_id"]: r for r in rows(synth_dir, "hosp/prescriptions") if r["drug_type"] == "MAIN"
    }
    assert set(pharmacy) == set(prescriptions)
    bases = [r for r in rows(synth_dir, "hosp/prescriptions") if r["drug_type"] == "BASE"]
    assert bases and all(prescriptions[b["pharmacy_id"]]["route"] == "IV" for b in bases)
    for rx in prescriptions.values():
        assert rx["poe_id"] in poe and poe[rx["poe_id"]]["order_type"] == "Medications"
        assert rx["poe_id"] == f"{rx['subject_id']}-{rx['poe_seq']}"
        assert rx["starttime"] < rx["stoptime"]
    emar_ids = set()
    for emar in rows(synth_dir, "hosp/emar"):
        rx = prescriptions[emar["pharmacy_id"]]
        assert emar["poe_id"] == rx["poe_id"] and emar["medication"] == rx["drug"]
        assert rx["starttime"] <= emar["charttime"] <= rx["stoptime"]
        assert rx["starttime"] <= emar["scheduletime"] <= rx["stoptime"]
        assert emar["emar_id"] == f"{emar['subject_id']}-{emar['emar_seq']}"
        emar_ids.add(emar["emar_id"])
    charted = defaultdict(list)
    for emar in rows(synth_dir, "hosp/emar"):
        charted[emar["hadm_id"]].append((int(emar["emar_seq"]), emar["charttime"]))
    for administrations in charted.values():  # emar_seq grows with charttime
        times = [t for _, t in sorted(administrations)]
        assert times == sorted(times)
    detail_ids = {d["emar_id"] for d in rows(synth_dir, "hosp/emar_detail")}
    assert detail_ids == emar_ids
    bid = [r for r in prescriptions.values() if r["drug"] == "Apixaban"]
    assert bid and all(r["dose_val_rx"] == "5" and r["route"] == "PO" for r in bid)


def test_susceptibilities_agree_with_dilutions(synth_dir: Path) -> None:
    micro = json.loads((DATA / "micro.json").read_text())
    breakpoints = {ab["ab_itemid"]: (ab["s"], ab["r"]) for ab in micro["antibiotics"].values()}
    admissions = _by(synth_dir, "hosp/admissions", "hadm_id")
    tested = 0
    for row in rows(synth_dir, "hosp/microbiologyevents"):
        adm = admissions[row["hadm_id"]]
        assert adm["admittime"] <= row["charttime"] < adm["dischtime"]
        assert row["charttime"] < row["storetime"]
        assert row["chartdate"] == row["charttime"][:10] + " 00:00:00"
        if not row["ab_itemid"]:
            assert row["comments"] and not row["interpretation"]
            continue
        tested += 1
        s, r = breakpoints[int(row["ab_itemid"])]
        value = float(row["dilution_value"])
        expected = "S" if value <= s else "R" if value >= r else "I"
        assert row["interpretation"] == expected, row
        assert row["dilution_text"].endswith(f"{value:g}") and row["org_name"]
    assert tested > 0


def test_dictionaries_cover_every_code_used(synth_dir: Path) -> None:
    labitems = {r["itemid"] for r in rows(synth_dir, "hosp/d_labitems")}
    assert {r["itemid"] for r in rows(synth_dir, "hosp/labevents")} <= labitems
    d_items = {r["itemid"]: r["linksto"] for r in rows(synth_dir, "icu/d_items")}
    for table in (
        "chartevents",
        "inputevents",
        "outputevents",
        "procedureevents",
        "datetimeevents",
        "ingredientevents",
    ):
        used = {r["itemid"] for r in rows(synth_dir, f"icu/{table}")}
        assert used and all(d_items[i] == table for i in used), table
    for table, dictionary in (
        ("hosp/diagnoses_icd", "hosp/d_icd_diagnoses"),
        ("hosp/procedures_icd", "hosp/d_icd_procedures"),
    ):
        known = {(r["icd_code"], r["icd_version"]) for r in rows(synth_dir, dictionary)}
        used = {(r["icd_code"], r["icd_version"]) for r in rows(synth_dir, table)}
        assert used <= known and {v for _, v in used} == {"9", "10"}, table
    hcpcs = {r["code"] for r in rows(synth_dir, "hosp/d_hcpcs")}
    assert {r["hcpcs_cd"] for r in rows(synth_dir, "hosp/hcpcsevents")} <= hcpcs
    providers = {r["provider_id"] for r in rows(synth_dir, "hosp/provider")}
    assert {r["admit_provider_id"] for r in rows(synth_dir, "hosp/admissions")} <= providers
    caregivers = {r["caregiver_id"] for r in rows(synth_dir, "icu/caregiver")}
    assert {r["caregiver_id"] for r in rows(synth_dir, "icu/chartevents")} <= caregivers


def test_discharge_summaries_agree_with_the_record(synth_dir: Path) -> None:
    titles = {
        (r["icd_code"], r["icd_version"]): r["long_title"] for r in rows(synth_dir, "hosp/d_icd_diagnoses")
    }
    diagnoses = defaultdict(list)
    for dx in rows(synth_dir, "hosp/diagnoses_icd"):
        diagnoses[dx["hadm_id"]].append(titles[(dx["icd_code"], dx["icd_version"])])
    drugs = defaultdict(set)
    for rx in rows(synth_dir, "hosp/prescriptions"):
        drugs[rx["hadm_id"]].add(rx["drug"])
    lab_values = defaultdict(set)
    labels = {r["itemid"]: r["label"] for r in rows(synth_dir, "hosp/d_labitems")}
    for lab in rows(synth_dir, "hosp/labevents"):
        lab_values[lab["hadm_id"]].add((labels[lab["itemid"]], lab["value"]))
    admissions = _by(synth_dir, "hosp/admissions", "hadm_id")
    notes = list(rows(synth_dir, "note/discharge"))
    assert {n["hadm_id"] for n in notes} == set(admissions)
    for note in notes:
        text, hadm = note["text"], note["hadm_id"]
        assert note["note_id"] == f"{note['subject_id']}-DS-{note['note_seq']}"
        for title in diagnoses[hadm]:
            assert f"- {title}" in text
        meds = text.split("Discharge Medications:\n")[1].split("\n\n")[0]
        for line in meds.splitlines():
            if line != "None.":
                assert any(line.split(". ", 1)[1].startswith(d + " ") for d in drugs[hadm]), line
        results = text.split("Pertinent Results:\n")[1].split("\n\n")[0]
        for line in results.splitlines():
            if line.startswith("- ") and " on admission" in line:
                label, rest = line[2:].split(": ", 1)
                assert (label, rest.split(" ")[0]) in lab_values[hadm], line
        assert admissions[hadm]["dischtime"][:10] in text
    radiology = list(rows(synth_dir, "note/radiology"))
    assert radiology and all("IMPRESSION:" in r["text"] for r in radiology)
    for r in radiology:
        adm = admissions[r["hadm_id"]]
        assert adm["admittime"] <= r["charttime"] <= adm["dischtime"]


def test_ids_are_unique_and_in_synthetic_ranges(synth_dir: Path) -> None:
    for table, key, low in (
        ("hosp/admissions", "hadm_id", 30_000_000),
        ("icu/icustays", "stay_id", 40_000_000),
        ("ed/edstays", "stay_id", 48_000_000),
        ("hosp/labevents", "labevent_id", 200_000_000),
        ("hosp/pharmacy", "pharmacy_id", 100_000_000),
        ("hosp/poe", "poe_id", None),
        ("hosp/microbiologyevents", "microevent_id", 5_000_000),
        ("hosp/transfers", "transfer_id", 50_000_000),
        ("note/discharge", "note_id", None),
    ):
        values = [r[key] for r in rows(synth_dir, table)]
        assert len(values) == len(set(values)), table
        if low:
            assert min(int(v) for v in values) >= low, table


def test_every_id_lies_in_its_patients_block(synth_dir: Path) -> None:
    """Patient i's ids are the i-th block of each sequence, so a shard can draw its patients alone."""
    first = ID_BLOCKS["subject_id"].start
    for table, column, sequence in (
        ("hosp/admissions", "hadm_id", "hadm_id"),
        ("icu/icustays", "stay_id", "icu_stay_id"),
        ("ed/edstays", "stay_id", "ed_stay_id"),
        ("hosp/transfers", "transfer_id", "transfer_id"),
        ("hosp/labevents", "labevent_id", "labevent_id"),
        ("hosp/labevents", "specimen_id", "specimen_id"),
        ("hosp/microbiologyevents", "microevent_id", "microevent_id"),
        ("hosp/microbiologyevents", "micro_specimen_id", "micro_specimen_id"),
        ("hosp/pharmacy", "pharmacy_id", "pharmacy_id"),
        ("icu/inputevents", "orderid", "orderid"),
        ("icu/procedureevents", "orderid", "orderid"),
    ):
        block = ID_BLOCKS[sequence]
        found = [(int(r["subject_id"]) - first, int(r[column])) for r in rows(synth_dir, table)]
        assert found, table
        assert all(block.start + i * block.size <= v < block.start + (i + 1) * block.size
                   for i, v in found), (table, column)


def test_low_magnesium_and_potassium_are_repleted_after_the_result(synth_dir: Path) -> None:
    repletion = {"50960": "Magnesium Sulfate", "50971": "Potassium Chloride"}
    orders = defaultdict(list)
    for rx in rows(synth_dir, "hosp/prescriptions"):
        if rx["drug"] in repletion.values():
            orders[(rx["hadm_id"], rx["drug"])].append(rx["starttime"])
    admissions = _by(synth_dir, "hosp/admissions", "hadm_id")
    low = 0
    for lab in rows(synth_dir, "hosp/labevents"):
        if (
            lab["itemid"] in repletion
            and lab["hadm_id"]
            and float(lab["valuenum"]) < float(lab["ref_range_lower"])
        ):
            if ts(lab["storetime"]) + timedelta(hours=4) >= ts(admissions[lab["hadm_id"]]["dischtime"]):
                continue  # too close to discharge to be given
            low += 1
            starts = orders[(lab["hadm_id"], repletion[lab["itemid"]])]
            assert any(
                lab["storetime"] < s <= str(ts(lab["storetime"]) + timedelta(hours=3)) for s in starts
            ), lab
    assert low > 0


def test_presenting_vitals_in_the_summary_are_the_ed_triage_values(synth_dir: Path) -> None:
    triage = _by(synth_dir, "ed/triage", "stay_id")
    by_hadm = {s["hadm_id"]: triage[s["stay_id"]] for s in rows(synth_dir, "ed/edstays") if s["hadm_id"]}
    checked = 0
    for note in rows(synth_dir, "note/discharge"):
        t = by_hadm.get(note["hadm_id"])
        if t:
            checked += 1
            assert (
                f"HR {float(t['heartrate']):.0f} BP {float(t['sbp']):.0f}/{float(t['dbp']):.0f}"
                in note["text"]
            )
            assert f"T {float(t['temperature']):.1f} " in note["text"]
    assert checked > 0


def test_held_home_drugs_are_not_given_and_no_double_anticoagulation(synth_dir: Path) -> None:
    drugs = defaultdict(set)
    for rx in rows(synth_dir, "hosp/prescriptions"):
        drugs[rx["hadm_id"]].add(rx["drug"])
    stopped_seen = 0
    for note in rows(synth_dir, "note/discharge"):
        if "Medications Stopped:\n" in note["text"]:
            stopped = note["text"].split("Medications Stopped:\n")[1].split("\n\n")[0].splitlines()
            discharge = note["text"].split("Discharge Medications:\n")[1].split("\n\n")[0]
            for line in stopped:
                name = line.removeprefix("- ")
                stopped_seen += 1
                assert name not in drugs[note["hadm_id"]] and f". {name} " not in discharge
    assert stopped_seen > 0
    for hadm, names in drugs.items():
        assert not ({"Apixaban"} <= names and names & {"Heparin", "Enoxaparin Sodium"}), hadm


def test_ventilator_settings_only_while_ventilated_and_fingersticks_follow_glucose(synth_dir: Path) -> None:
    ventilated = {
        p["stay_id"]: (p["starttime"], p["endtime"])
        for p in rows(synth_dir, "icu/procedureevents")
        if p["itemid"] == "225792"
    }
    settings = fingersticks = 0
    serum = defaultdict(list)
    for lab in rows(synth_dir, "hosp/labevents"):
        if lab["itemid"] == "50931" and lab["hadm_id"]:
            serum[lab["hadm_id"]].append(float(lab["valuenum"]))
    for chart in rows(synth_dir, "icu/chartevents"):
        if chart["itemid"] in ("223835", "220339", "224684"):
            settings += 1
            start, end = ventilated[chart["stay_id"]]
            assert start <= chart["charttime"] <= end
        elif chart["itemid"] == "225664":
            fingersticks += 1
            values = serum[chart["hadm_id"]]
            assert min(values) * 0.5 <= float(chart["valuenum"]) <= max(values) * 1.5
    assert ventilated and settings > 0 and fingersticks > 0
