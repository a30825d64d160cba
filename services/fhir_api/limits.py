"""Request limits, kept import-light so the CLI can show defaults without loading the web stack."""

DEFAULT_MAX_BODY = 10 * 1024 * 1024  # bytes; larger bodies get 413
MAX_SEARCH_PARAMS = 100  # search parameters in one search (or one set of conditional criteria); more: 400
MAX_SEARCH_VALUES = 1000  # OR alternatives over all of a search's parameters together; more: 400
