"""Search is tested at both of its layers: the API's tests use tests/fhir_api's fixtures, the store's search
tests
the store fixtures re-exported here (each backend, the demo store)."""

from tests.fhir_api.store.conftest import demo_ndjson, demo_store, store  # noqa: F401
