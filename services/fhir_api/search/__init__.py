"""FHIR search parameters, below the store: the generated table, value parsing, parameter keys, extraction."""

from services.fhir_api.search.registry import patient_compartment, supported_search_params

__all__ = ["supported_search_params", "patient_compartment"]
