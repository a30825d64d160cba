"""FHIR R4 Subscriptions fed by the change log, and `rounds feed` (issue 30). See README.md."""
