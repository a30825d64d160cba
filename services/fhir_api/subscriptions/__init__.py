"""FHIR R4 Subscriptions fed by the change log, and `rounds feed`. See README.md."""
