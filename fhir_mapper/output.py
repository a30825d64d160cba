"""NDJSON output, one `Mimic<Profile>.ndjson` per profile, with optional R4B validation on write."""

from __future__ import annotations

from pathlib import Path
from typing import IO, Any

import orjson

from fhir_mapper.report import RunReport


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


class NdjsonSink:
    """Writes resources to per-profile files in `out`; validates every `stride`-th one (0 = none)."""

    def __init__(self, out: Path, report: RunReport, stride: int = 0) -> None:
        self.out, self.report, self.stride = out, report, stride
        self._files: dict[str, IO[bytes]] = {}
        self._validator = Validator() if stride else None

    def emit(self, profile: str, resource: dict[str, Any]) -> None:
        handle = self._files.get(profile)
        if handle is None:
            handle = self._files[profile] = (self.out / file_name(profile)).open("wb", buffering=1 << 20)
            self.report.written[file_name(profile)] = 0
        handle.write(orjson.dumps(resource) + b"\n")
        name = file_name(profile)
        n = self.report.written[name] = self.report.written[name] + 1
        if self._validator and (n - 1) % self.stride == 0:
            self.report.validated[name] = self.report.validated.get(name, 0) + 1
            error = self._validator.errors(resource)
            if error:
                self.report.invalid(name, resource.get("id", ""), error)

    def close(self) -> None:
        for handle in self._files.values():
            handle.close()
        self._files.clear()
