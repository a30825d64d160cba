"""Request limits, kept import-light so the CLI can show defaults without loading the web stack."""

DEFAULT_MAX_BODY = 10 * 1024 * 1024  # bytes; larger bodies get 413
