"""The demo's report is opened in the same headless Chromium the report tests use."""

from tests.consumers.report.conftest import chromium  # noqa: F401 - the fixture, shared
