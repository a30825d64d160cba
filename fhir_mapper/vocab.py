"""Value maps of the official mapping (kind-lab/mimic-fhir sql/fhir_etl/map_*.sql), kept as data."""

from __future__ import annotations

OMB = "urn:oid:2.16.840.1.113883.6.238"
NULL_FLAVOR = "http://terminology.hl7.org/CodeSystem/v3-NullFlavor"
MARITAL = "http://terminology.hl7.org/CodeSystem/v3-MaritalStatus"

GENDER = {"F": "female", "M": "male"}
MARITAL_STATUS = {
    "MARRIED": (MARITAL, "M"),
    "SINGLE": (MARITAL, "S"),
    "WIDOWED": (MARITAL, "W"),
    "DIVORCED": (MARITAL, "D"),
    None: (NULL_FLAVOR, "UNK"),
}

_WHITE = ("White", "2106-3", OMB)
_BLACK = ("Black or African American", "2054-5", OMB)
_ASIAN = ("Asian", "2028-9", OMB)
_UNK = ("unknown", "UNK", NULL_FLAVOR)
# race -> (omb display, omb code, system), (ethnicity display, code) or None
_NOT_HISPANIC = ("Not Hispanic or Latino", "2186-5")
_HISPANIC = ("Hispanic or Latino", "2135-2")
RACE: dict[str, tuple[tuple[str, str, str], tuple[str, str] | None]] = {
    "BLACK/AFRICAN": (_BLACK, _NOT_HISPANIC),
    "MULTIPLE RACE/ETHNICITY": (("other", "OTH", NULL_FLAVOR), _NOT_HISPANIC),
    "WHITE - OTHER EUROPEAN": (_WHITE, _NOT_HISPANIC),
    "WHITE - EASTERN EUROPEAN": (_WHITE, _NOT_HISPANIC),
    "ASIAN": (_ASIAN, _NOT_HISPANIC),
    "ASIAN - ASIAN INDIAN": (_ASIAN, _NOT_HISPANIC),
    "ASIAN - KOREAN": (_ASIAN, _NOT_HISPANIC),
    "ASIAN - CHINESE": (_ASIAN, _NOT_HISPANIC),
    "BLACK/AFRICAN AMERICAN": (_BLACK, _NOT_HISPANIC),
    "AMERICAN INDIAN/ALASKA NATIVE": (("American Indian or Alaska Native", "1002-5", OMB), _NOT_HISPANIC),
    "NATIVE HAWAIIAN OR OTHER PACIFIC ISLANDER": (
        ("Native Hawaiian or Other Pacific Islander", "2076-8", OMB),
        _NOT_HISPANIC,
    ),
    "BLACK/CAPE VERDEAN": (_BLACK, _NOT_HISPANIC),
    "WHITE": (_WHITE, _NOT_HISPANIC),
    "WHITE - BRAZILIAN": (_WHITE, _NOT_HISPANIC),
    "WHITE - RUSSIAN": (_WHITE, _NOT_HISPANIC),
    "BLACK/CARIBBEAN ISLAND": (_BLACK, _NOT_HISPANIC),
    "ASIAN - SOUTH EAST ASIAN": (_ASIAN, _NOT_HISPANIC),
    "PORTUGUESE": (_WHITE, _NOT_HISPANIC),
    "HISPANIC/LATINO - CUBAN": (_WHITE, _HISPANIC),
    "HISPANIC/LATINO - PUERTO RICAN": (_WHITE, _HISPANIC),
    "HISPANIC/LATINO - HONDURAN": (_WHITE, _HISPANIC),
    "HISPANIC/LATINO - COLUMBIAN": (_WHITE, _HISPANIC),
    "HISPANIC/LATINO - CENTRAL AMERICAN": (_WHITE, _HISPANIC),
    "HISPANIC OR LATINO": (_WHITE, _HISPANIC),
    "HISPANIC/LATINO - GUATEMALAN": (_WHITE, _HISPANIC),
    "HISPANIC/LATINO - MEXICAN": (_WHITE, _HISPANIC),
    "HISPANIC/LATINO - DOMINICAN": (_WHITE, _HISPANIC),
    "SOUTH AMERICAN": (_WHITE, _HISPANIC),
    "HISPANIC/LATINO - SALVADORAN": (_WHITE, _HISPANIC),
    "PATIENT DECLINED TO ANSWER": (("asked but unknown", "ASKU", NULL_FLAVOR), None),
    "UNABLE TO OBTAIN": (_UNK, None),
    "UNKNOWN": (_UNK, None),
    "OTHER": (_UNK, None),
}

# admission_type -> (class code, class display, priority code, priority display)
ADMISSION_TYPE = {
    "EU OBSERVATION": ("OBSENC", "observation encounter", "R", "routine"),
    "URGENT": ("AMB", "ambulatory", "UR", "urgent"),
    "ELECTIVE": ("AMB", "ambulatory", "EL", "elective"),
    "AMBULATORY OBSERVATION": ("AMB", "ambulatory", "R", "routine"),
    "SURGICAL SAME DAY ADMISSION": ("SS", "short stay", "R", "routine"),
    "DIRECT OBSERVATION": ("OBSENC", "observation encounter", "R", "routine"),
    "DIRECT EMER.": ("EMER", "emergency", "EM", "emergency"),
    "OBSERVATION ADMIT": ("OBSENC", "observation encounter", "R", "routine"),
    "EW EMER.": ("EMER", "emergency", "EM", "emergency"),
}

LAB_INTERPRETATION = {"abnormal": ("A", "abnormal"), "A": ("A", "abnormal")}
MICRO_INTERPRETATION = {
    "I": ("IND", "Indeterminate"),
    "P": ("IE", "Insufficient evidence"),
    "R": ("R", "Resistant"),
    "S": ("S", "Susceptible"),
}
PROCEDURE_ICU_STATUS = {"FinishedRunning": "completed", "Paused": "on-hold", "Stopped": "stopped"}
MEDREQ_STATUS = {
    "Discontinued via patient discharge": "completed",
    "Inactive (Due to a change order)": "stopped",
    "TPN Order (Acknowledged, Not Pumped)": "draft",
    "U": "unknown",
    "Expired": "stopped",
    "Active": "active",
    "Discontinued": "completed",
    "H": "unknown",
    "Inactive": "stopped",
}
DURATION_UNIT = {"Doses": None, "Hours": "h", "Months": "mo", "Weeks": "wk", "Days": "d", "Ongoing": None}
