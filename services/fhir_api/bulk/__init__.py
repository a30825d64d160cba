"""Bulk Data `$export` (FHIR Bulk Data Access v2) on the shared record and on sessions. See README.md."""
