"""Request limits, kept import-light so the CLI can show defaults without loading the web stack. The body
limit is a setting (ROUNDS_MAX_BODY_BYTES, `rounds serve --max-body-bytes`; rounds/settings.py).

The server states them in its CapabilityStatement (`rest.documentation`, http/request_limits.py).
Requests over the URL and header limits are refused by an ASGI middleware with an OperationOutcome
(414 / 431); the HTTP parser in front of it (http/protocol.py) lets requests up to `HEAD_CAP` through
to that middleware and answers anything larger itself, also with an OperationOutcome, so no oversized
request gets a non-FHIR answer.
"""

MAX_SEARCH_PARAMS = 100  # search parameters in one search (or one set of conditional criteria); more: 400
MAX_SEARCH_VALUES = 1000  # OR alternatives over all of a search's parameters together; more: 400
MAX_URL_BYTES = 32 * 1024  # path + query as sent (percent-encoded); more: 414 (longer searches: POST _search)
MAX_HEADER_FIELDS = 100  # header fields in one request; more: 431
MAX_HEADER_BYTES = 64 * 1024  # header names and values together; more: 431
HEAD_CAP = 256 * 1024  # request line + headers the HTTP parser buffers before refusing on its own (431)
HEAD_FIELDS_CAP = 1000  # header fields the HTTP parser collects before refusing on its own (431)
