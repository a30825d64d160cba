"""FHIR search: generated parameter table, value extraction/indexing, SQL query building and execution."""

from services.fhir_api.search.registry import patient_compartment, supported_search_params

__all__ = ["supported_search_params", "patient_compartment"]
