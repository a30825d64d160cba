"""The FHIR R4 REST layer: routers, content negotiation, bundles, errors. See README.md."""
