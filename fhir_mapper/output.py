"""NDJSON output, one `Mimic<Profile>.ndjson` per profile, with optional R4B validation on write."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

import orjson

from fhir_mapper.report import RunReport

_dumps, _NEWLINE = orjson.dumps, orjson.OPT_APPEND_NEWLINE


def file_name(profile: str) -> str:
    return f"Mimic{profile}.ndjson"


class Validator:
    """Checks resources against fhir.resources R4B models (class chosen by resourceType)."""

    def __init__(self) -> None:
        from fhir.resources.R4B import get_fhir_model_class

        self._model = get_fhir_model_class

    def errors(self, resource: dict[str, Any]) -> str | None:
        try:
            self._model(resource["resourceType"]).model_validate(resource)
        except Exception as exc:  # pydantic ValidationError, KeyError for unknown types
            return str(exc).replace("\n", " ")[:500]
        return None


class _File:
    __slots__ = ("handle", "name", "count")

    def __init__(self, out: Path, profile: str) -> None:
        self.name = file_name(profile)
        self.handle = (out / self.name).open("wb", buffering=1 << 20)
        self.count = 0


class NdjsonSink:
    """Writes resources to per-profile files in `out`; validates every `stride`-th one (0 = none)."""

    def __init__(self, out: Path, report: RunReport, stride: int = 0) -> None:
        self.out, self.report, self.stride = out, report, stride
        self._files: dict[str, _File] = {}
        self._validator = Validator() if stride else None

    def _file(self, profile: str) -> _File:
        f = self._files.get(profile)
        if f is None:
            f = self._files[profile] = _File(self.out, profile)
        return f

    def writer(self, profile: str) -> Callable[[dict[str, Any]], None]:
        """`emit` bound to one profile for hot loops: file and counter looked up once (the file is still
        created by the first resource, so a profile with none gets no file)."""
        if self._validator is not None:
            return partial(self.emit, profile)
        f: _File | None = None

        def write(resource: dict[str, Any]) -> None:
            nonlocal f
            if f is None:
                f = self._file(profile)
            f.handle.write(_dumps(resource, option=_NEWLINE))
            f.count += 1

        return write

    def emit(self, profile: str, resource: dict[str, Any]) -> None:
        f = self._files.get(profile) or self._file(profile)
        f.handle.write(_dumps(resource, option=_NEWLINE))
        f.count += 1
        if self._validator is not None and (f.count - 1) % self.stride == 0:
            self.report.validated[f.name] = self.report.validated.get(f.name, 0) + 1
            error = self._validator.errors(resource)
            if error:
                self.report.invalid(f.name, resource.get("id", ""), error)

    def close(self) -> None:
        for f in self._files.values():
            f.handle.close()
            self.report.written[f.name] = f.count
        self._files.clear()
