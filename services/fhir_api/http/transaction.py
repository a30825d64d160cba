"""batch and transaction Bundles (POST to the FHIR base).

transaction: all-or-nothing through `store.transaction(ctx)`, processed DELETE, POST, PUT/PATCH, GET/HEAD
as the spec orders them, with `urn:uuid:` fullUrls resolved to the ids the server assigns. batch: entries
independent, each with its own status or OperationOutcome. Both answer in the order of the request.
"""

from __future__ import annotations

import base64
import binascii
import logging
import uuid
from dataclasses import dataclass, replace
from typing import Any
from urllib.parse import parse_qsl, urlsplit

import orjson

from services.fhir_api.http import crud, search, urls
from services.fhir_api.http.bundles import bundle
from services.fhir_api.http.errors import FhirHttpError, as_http_error
from services.fhir_api.http.outcome import Call, Outcome, error_entry, to_entry
from services.fhir_api.http.params import check_id, parse_etag, parse_version
from services.fhir_api.http.validation import check_type
from services.fhir_api.store.interface import StoreError
from services.fhir_api.store.validation import repeated_full_url

log = logging.getLogger(__name__)
ORDER = {"DELETE": 0, "POST": 1, "PUT": 2, "PATCH": 2, "GET": 3, "HEAD": 3}


@dataclass
class Entry:
    index: int
    method: str
    path: list[str]  # URL path segments relative to the FHIR base
    query: list[tuple[str, str]]
    resource: Any = None
    full_url: str | None = None
    if_match: int | None = None
    if_none_exist: list[tuple[str, str]] | None = None
    assigned_id: str | None = None  # id reserved for a plain POST so urn:uuid references resolve early


def parse_entry(call: Call, index: int, raw: Any) -> Entry:
    if not isinstance(raw, dict) or not isinstance(raw.get("request"), dict):
        raise FhirHttpError(400, f"entry {index}: missing request")
    request = raw["request"]
    method = str(request.get("method", "")).upper()
    if method not in ORDER:
        raise FhirHttpError(400, f"entry {index}: unsupported request.method {method[:20]!r}")
    url = request.get("url")
    if not isinstance(url, str) or not url:
        raise FhirHttpError(400, f"entry {index}: missing request.url")
    if url.startswith(call.base + "/"):
        url = url[len(call.base) + 1 :]
    parts = urlsplit(url)
    if parts.scheme or parts.netloc:
        raise FhirHttpError(400, f"entry {index}: request.url {url[:120]!r} is not on this server")
    path = [p for p in parts.path.split("/") if p]
    if not path:
        raise FhirHttpError(400, f"entry {index}: request.url must name a resource type")
    criteria = (
        parse_qsl(request["ifNoneExist"].split("?", 1)[-1], keep_blank_values=True)
        if isinstance(request.get("ifNoneExist"), str)
        else None
    )
    return Entry(
        index,
        method,
        path,
        parse_qsl(parts.query, keep_blank_values=True),
        raw.get("resource"),
        raw.get("fullUrl"),
        parse_etag(request.get("ifMatch")),
        criteria,
    )


def _patch_document(resource: Any) -> Any:
    """A PATCH entry carries its JSON Patch in a Binary (base64 `data`)."""
    if not isinstance(resource, dict) or resource.get("resourceType") != "Binary" or "data" not in resource:
        raise FhirHttpError(400, "a PATCH entry needs a Binary resource holding the JSON Patch")
    try:
        return orjson.loads(base64.b64decode(resource["data"], validate=True))
    except (binascii.Error, ValueError, TypeError) as exc:
        raise FhirHttpError(400, f"PATCH entry Binary.data is not base64 JSON: {exc}") from exc


def _need_resource(entry: Entry) -> dict:
    if not isinstance(entry.resource, dict):
        raise FhirHttpError(400, f"{entry.method} entry needs a resource")
    return entry.resource


def execute(call: Call, entry: Entry) -> Outcome:
    """Run one entry through the same operations the REST routes use, chosen by the same URL grammar
    (urls.py): an entry means in a Bundle what its method and URL mean on the REST API."""
    method, path, query = entry.method, entry.path, entry.query
    found = urls.match("GET" if method == "HEAD" else method, "/" + "/".join(path))
    name = found.route.name if found else None
    params = found.params if found else {}
    type_ = check_type(params["type"]) if "type" in params else None
    id_ = check_id(params["id"]) if "id" in params else None
    patch = _patch_document(entry.resource) if name in ("patch", "conditional-patch") else None
    if call.guard is not None:  # the token's scopes and compartment, entry by entry (auth/guard.py)
        body = patch if patch is not None else entry.resource
        query, entry.if_none_exist = call.guard.entry(call, name, type_, id_, query, entry.if_none_exist,
                                                      body)
    if name == "history-system":
        return search.history(call, None, None, query)
    if name == "search-type" or name == "search-type-post":
        return search.search(call, type_, query)
    if name == "history-type":
        return search.history(call, type_, None, query)
    if name == "read":
        return crud.read(call, type_, id_)
    if name == "everything" and type_ == "Patient":
        return search.everything(call, id_, query)
    if name == "history-instance":
        return search.history(call, type_, id_, query)
    if name == "vread":
        return crud.vread(call, type_, id_, parse_version(params["version"]))
    if name == "create":
        return crud.create(call, type_, _need_resource(entry), entry.if_none_exist, id=entry.assigned_id)
    if name == "conditional-update":
        return crud.conditional_update(call, type_, _need_resource(entry), query)
    if name == "update":
        return crud.update(call, type_, id_, _need_resource(entry), entry.if_match)
    if name == "conditional-patch":
        return crud.conditional_patch(call, type_, query, patch)
    if name == "patch":
        return crud.patch(call, type_, id_, patch, entry.if_match)
    if name == "conditional-delete":
        return crud.conditional_delete(call, type_, query)
    if name == "delete":
        return crud.delete(call, type_, id_)
    raise FhirHttpError(400, f"unsupported {method} {'/'.join(path)[:120]}")


def _rewrite(value: Any, refs: dict[str, str]) -> Any:
    """Replace references to bundle-local fullUrls (urn:uuid:...) with the server's Type/id."""
    if isinstance(value, dict):
        return {k: _rewrite(v, refs) for k, v in value.items()}
    if isinstance(value, list):
        return [_rewrite(v, refs) for v in value]
    if isinstance(value, str) and value in refs:
        return refs[value]
    return value


def _reserve_ids(entries: list[Entry]) -> dict[str, str]:
    refs: dict[str, str] = {}
    for e in entries:
        if not e.full_url:
            continue
        if e.method == "POST" and len(e.path) == 1 and not e.if_none_exist:
            e.assigned_id = str(uuid.uuid4())
            refs[e.full_url] = f"{e.path[0]}/{e.assigned_id}"
        elif e.method == "PUT" and len(e.path) == 2:
            refs[e.full_url] = f"{e.path[0]}/{e.path[1]}"
    return refs


def _run_transaction(call: Call, entries: list[Entry]) -> list[dict]:
    refs = _reserve_ids(entries)
    results: dict[int, dict] = {}
    with call.store.transaction(call.ctx) as tx:
        tx_call = replace(call, store=tx)
        for e in sorted(entries, key=lambda e: (ORDER[e.method], e.assigned_id is not None)):
            if isinstance(e.resource, dict):
                e.resource = _rewrite(e.resource, refs)
            try:
                outcome = execute(tx_call, e)
            except (FhirHttpError, StoreError) as exc:
                err = as_http_error(exc)
                raise FhirHttpError(
                    err.status,
                    f"entry {e.index}: {err}",
                    code=err.code,
                    issues=[f"entry {e.index}: {m}" for m in err.issues],
                ) from exc
            if e.full_url and outcome.stored is not None and e.full_url not in refs:
                refs[e.full_url] = f"{outcome.stored.resource_type}/{outcome.stored.id}"
            results[e.index] = to_entry(tx_call, outcome)
    return [results[i] for i in range(len(entries))]


def _run_batch(call: Call, raw_entries: list) -> list[dict]:
    out = []
    for index, raw in enumerate(raw_entries):
        try:
            out.append(to_entry(call, execute(call, parse_entry(call, index, raw))))
        except (FhirHttpError, StoreError) as exc:
            err = as_http_error(exc)
            out.append(error_entry(err.status, err.issues, err.code))
        except Exception:  # one broken entry must not sink the others
            log.exception("batch entry %d failed", index)
            out.append(error_entry(500, ["internal server error"], "exception"))
    return out


def process(call: Call, doc: dict) -> Outcome:
    kind = doc.get("type")
    if doc.get("resourceType") != "Bundle" or kind not in ("batch", "transaction"):
        raise FhirHttpError(400, "POST to the base takes a Bundle of type batch or transaction")
    raw_entries = doc.get("entry") or []
    if not isinstance(raw_entries, list):
        raise FhirHttpError(400, "Bundle.entry must be an array")
    if (twice := repeated_full_url(doc, versions_differ_ok=kind == "batch")) is not None:  # bdl-7
        raise FhirHttpError(400, f"fullUrl {twice[:120]!r} appears more than once in the {kind}")
    if kind == "batch":
        return Outcome(200, body=bundle("batch-response", _run_batch(call, raw_entries)))
    entries = [parse_entry(call, i, raw) for i, raw in enumerate(raw_entries)]
    return Outcome(200, body=bundle("transaction-response", _run_transaction(call, entries)))
