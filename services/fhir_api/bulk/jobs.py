"""Export jobs kept on disk: one folder per job under ROUNDS_BULK_DIR holding `job.json` (what was asked, its
state, what was written) and one `<Type>.ndjson` per exported type.

The folder is the job's whole state, so any worker of `rounds serve` on the same disk answers its status and
serves its files, and a cancelled job is simply its folder removed (the writer stops at its next page when
the folder is gone). `job.json` is replaced atomically (write + rename), never seen half-written.
"""

from __future__ import annotations

import re
import shutil
import uuid
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Literal

import orjson

State = Literal["in-progress", "completed", "failed"]
Level = Literal["system", "patient", "group"]
JOB_ID = re.compile(r"^[0-9a-f]{32}$")
FILE_NAME = re.compile(r"^[A-Z][A-Za-z]{1,63}\.ndjson$")


@dataclass
class ExportJob:
    """One kick-off: the request as made, and what the writer has done so far."""

    level: Level
    request: str  # the kick-off URL, echoed in the manifest
    transaction_time: str  # FHIR instant: the export reflects the record as of (about) this time
    session: str | None = None  # the base it was asked on (None: /fhir); its status answers there only
    group: str | None = None
    types: list[str] | None = None  # _type (None: every type the level covers)
    since: str | None = None  # _since, as given
    type_filters: dict[str, list[str]] = field(default_factory=dict)  # _typeFilter: type -> queries, ORed
    token: str = "anonymous"  # a digest of the kick-off's bearer token (quota.py), never the token
    elements: list[str] | None = None  # _elements: `element` or `Type.element` (elements.py)
    id: str = field(default_factory=lambda: uuid.uuid4().hex)
    state: State = "in-progress"
    progress: str = "queued"
    output: list[dict] = field(default_factory=list)  # {"type", "file", "count"}
    error: list[str] = field(default_factory=list)  # what failed the job (the poll's OperationOutcome)
    # what the job left out and went on (a type the client may not read, a resource that could not be
    # written): the manifest's `error` file, one OperationOutcome per line
    issues: list[str] = field(default_factory=list)


class JobStore:
    """The jobs folder (ROUNDS_BULK_DIR)."""

    def __init__(self, root: str | Path) -> None:
        self.root = Path(root)

    def folder(self, job_id: str) -> Path:
        return self.root / job_id

    def save(self, job: ExportJob) -> None:
        folder = self.folder(job.id)
        if not folder.is_dir():
            raise FileNotFoundError(folder)  # cancelled: never recreate it
        tmp = folder / f".job.{uuid.uuid4().hex}.json"
        tmp.write_bytes(orjson.dumps(asdict(job)))
        tmp.replace(folder / "job.json")

    def create(self, job: ExportJob) -> None:
        self.folder(job.id).mkdir(parents=True)
        self.save(job)

    def load(self, job_id: str) -> ExportJob | None:
        if not JOB_ID.match(job_id):
            return None
        try:
            doc = orjson.loads((self.folder(job_id) / "job.json").read_bytes())
        except (FileNotFoundError, NotADirectoryError, orjson.JSONDecodeError):
            return None
        return ExportJob(**doc)

    def cancel(self, job_id: str) -> bool:
        """Remove the job and its files; False when there is no such job."""
        if self.load(job_id) is None:
            return False
        # Renamed away first (atomic): a writer still running finds its folder gone at once and cannot
        # write job.json back into it while the files are being removed.
        gone = self.root / f".cancelled-{job_id}-{uuid.uuid4().hex}"
        try:
            self.folder(job_id).rename(gone)
        except FileNotFoundError:
            return False
        shutil.rmtree(gone, ignore_errors=True)
        return True

    def file(self, job_id: str, name: str) -> Path | None:
        if not JOB_ID.match(job_id) or not FILE_NAME.match(name):
            return None
        path = self.folder(job_id) / name
        return path if path.is_file() else None
