"""The scenario builder streams the record (issue 43 item 2): it holds a few charts at a time, never every
chart, whatever the record's size. Every Chart the builder gets (read through FHIR, or back from its spool)
is tracked by a weak reference: the most alive at once must stay within the read window or the shelf, far
below the patients read."""

from __future__ import annotations

import asyncio
import tempfile
import weakref
from pathlib import Path

import httpx
import pytest

from rounds.shards import Shard
from services.simulator.scenarios import (
    BuildError,
    Streamed,
    build_async,
    build_from,
    builder,
    fhir_client,
    spool,
)
from services.simulator.scenarios.anchors import moments
from services.simulator.scenarios.builder import definitions_of
from services.simulator.scenarios.chart import Chart
from services.simulator.scenarios.parts import stream_into
from services.simulator.scenarios.proposals import Proposals, Shelf


@pytest.fixture
def live_charts(monkeypatch: pytest.MonkeyPatch) -> dict:
    """Counts the charts alive at every moment the builder takes one: `peak` and the number `taken`."""
    seen = {"alive": 0, "peak": 0, "taken": 0, "loads": 0}

    def gone() -> None:
        seen["alive"] -= 1

    def track(chart: Chart) -> Chart:
        weakref.finalize(chart, gone)  # runs when the chart is freed
        seen["alive"] += 1
        seen["taken"] += 1
        seen["peak"] = max(seen["peak"], seen["alive"])
        return chart

    read_chart, load = builder.read_chart, spool.Spool.load

    async def reading(*args, **kwargs) -> Chart:
        return track(await read_chart(*args, **kwargs))

    def loading(self, offset: int) -> Chart:
        seen["loads"] += 1
        return track(load(self, offset))

    monkeypatch.setattr(builder, "read_chart", reading)
    monkeypatch.setattr(spool.Spool, "load", loading)
    return seen


def test_the_build_holds_a_few_charts_never_every_chart(synthetic_app, live_charts: dict, tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """build_async's two steps (stream_into, build_from) on a quarter of the record (~50 patients), with a
    shelf of 4."""
    monkeypatch.setattr(Shelf, "CAPACITY", 4)

    async def stream() -> Streamed:
        async with fhir_client(synthetic_app) as client:
            proposals = Proposals(definitions_of(None))
            return await stream_into(client, tmp_path / "c.spool", Shard(0, 4), proposals)

    streamed = asyncio.run(stream())
    built = build_from(streamed, seed=11, sessions=24, per_category=2)
    read = built.summary["patients"]["read"]
    assert read >= 30 and built.summary["sessions"] >= 24
    assert live_charts["loads"] > Shelf.CAPACITY  # the selection read charts back, more than the shelf holds
    assert live_charts["taken"] == read + live_charts["loads"]
    # every chart held until the selection would make this `read` + the loads; streaming keeps the read window
    # (READ_CONCURRENCY) while reading, the shelf while selecting (+ the one being loaded, + the one whose
    # moment is being assembled when the shelf has let it go)
    assert live_charts["peak"] <= max(builder.READ_CONCURRENCY, Shelf.CAPACITY + 2) < read


def test_the_shelf_gives_back_the_moments_the_chart_proposed(synthetic_app) -> None:
    """A moment read back from the spool is the moment the anchor proposed while streaming: same patient,
    clock and anchor value (what the seeded order and the session's id are made of)."""
    defs = definitions_of(None)
    seen: list[tuple] = []

    async def run(tmp: Path) -> None:
        proposals = Proposals(defs)
        async with fhir_client(synthetic_app) as client:
            real = proposals.propose

            def propose(chart: Chart, number: int) -> None:
                if number < 3:
                    seen.extend((d.id, number, i, m.now, m.anchor_value, chart.patient)
                                for d in defs for i, m in enumerate(moments(d, chart)))
                real(chart, number)

            proposals.propose = propose  # type: ignore[method-assign]
            streamed = await stream_into(client, tmp / "c.spool", Shard(1, 4), proposals)
        by_id = {d.id: d for d in defs}
        try:
            for defn_id, number, index, now, value, patient in seen:
                m = streamed.shelf.moment(by_id[defn_id], number, index)
                assert (m.now, m.anchor_value, m.chart.patient) == (now, value, patient)
        finally:
            streamed.shelf.close()
        assert seen and streamed.read >= 30

    with tempfile.TemporaryDirectory() as tmp:
        asyncio.run(run(Path(tmp)))


def test_a_record_without_patients_is_an_error_and_leaves_no_spool(tmp_path: Path, monkeypatch) -> None:
    def empty(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, json={"resourceType": "Bundle", "type": "searchset", "entry": []})

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))  # where the build's spool would go
    client = httpx.AsyncClient(transport=httpx.MockTransport(empty), base_url="http://empty/fhir/")
    with pytest.raises(BuildError, match="holds no Patient"):
        asyncio.run(build_async(client))
    assert not list(tmp_path.iterdir())
