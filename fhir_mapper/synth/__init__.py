"""Faker-driven generator of MIMIC-IV-shaped tables (hosp/, icu/, ed/, note/) that the mapper reads as-is."""

from fhir_mapper.synth.generate import generate

__all__ = ["generate"]
