"""The candle chart: failed springs/upthrusts drawn as failed, every listed event drawn, no "1e7"
offset on the volume axis, event labels that do not overlap. Checked on the rendered figure."""

from __future__ import annotations

import pytest
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.collections import PathCollection

from markets import charts
from markets.data import MarketData
from markets.wyckoff import analyze

MD = MarketData()


def chart(code: str):
    inst = MD.resolve(code)
    bars = MD.bars(inst)
    a = analyze(bars, inst)
    fig = charts.draw_candles(bars, name=inst.name, analysis=a)
    FigureCanvasAgg(fig).draw()
    return a, bars, fig


def event_texts(fig) -> list:
    return [t for ax in fig.axes for t in ax.texts if (t.get_gid() or "").startswith("event:")]


@pytest.mark.parametrize("code", ["000001", "000333", "600150"])
def test_every_listed_event_is_drawn(code):
    a, bars, fig = chart(code)
    listed = a.to_dict()["events"]
    shown = charts.overlay(bars, a)
    assert len(shown.dates) > 160  # these lists reach past the last 160 bars
    drawn = {(str(shown.dates[x]), k) for x, k, _ in shown.markers}
    assert {(e["date"], e["kind"]) for e in listed} <= drawn
    assert len(event_texts(fig)) == len(shown.markers)


def test_failed_springs_and_upthrusts_are_drawn_as_failed():
    a, bars, fig = chart("000333")
    failed = [e for e in a.events if e.status == "failed" and e.kind in ("Spring", "UT", "UTAD")]
    assert failed
    shown = charts.overlay(bars, a)
    texts = event_texts(fig)
    labels = [t.get_text() for t in texts]
    for e in failed:
        x = shown.x_of(e.date)
        if x is None:
            continue
        k = next(j for j, (xx, kk, _) in enumerate(shown.markers) if xx == x and kk == e.kind)
        assert shown.failed[k] and labels[k] == f"{e.kind} failed"
        assert texts[k].get_gid() == f"event:{e.kind}:failed"
    ok = [j for j, f in enumerate(shown.failed) if not f]
    assert all("failed" not in labels[j] for j in ok)
    # the failed markers are hollow: no face colour
    hollow = [
        c
        for c in fig.axes[0].collections
        if isinstance(c, PathCollection) and len(c.get_offsets()) == 1 and c.get_facecolor().size == 0
    ]
    assert len(hollow) == sum(shown.failed)


@pytest.mark.parametrize("code", ["600519", "BTC", "000001"])
def test_no_offset_label_and_readable_volume_ticks(code):
    _, _, fig = chart(code)
    axv = fig.axes[1]
    assert axv.yaxis.get_offset_text().get_text() == ""
    ticks = [t.get_text() for t in axv.get_yticklabels() if t.get_text()]
    assert ticks and all("e" not in t for t in ticks)
    assert any(t.endswith(("万", "亿", "K", "M", "B")) for t in ticks)


def test_volume_formatter():
    cn, intl = charts.volume_formatter(True), charts.volume_formatter(False)
    assert [cn(v) for v in (12_000_000, 350_000_000, 15_000, 5_000, 0)] == [
        "1200万",
        "3.5亿",
        "1.5万",
        "5000",
        "0",
    ]
    assert [intl(v) for v in (12_000_000, 3_400, 2.5e9, 999)] == ["12M", "3.4K", "2.5B", "999"]


@pytest.mark.parametrize("code", ["000333", "000625", "600519", "000001"])
def test_event_labels_do_not_overlap(code):
    _, _, fig = chart(code)
    r = fig.canvas.get_renderer()  # the Agg canvas `chart` drew on
    boxes = [t.get_window_extent(r) for t in event_texts(fig)]
    assert len(boxes) >= 3
    for i in range(len(boxes)):
        for j in range(i + 1, len(boxes)):
            a, b = boxes[i], boxes[j]
            inter_w = min(a.x1, b.x1) - max(a.x0, b.x0)
            inter_h = min(a.y1, b.y1) - max(a.y0, b.y0)
            assert not (inter_w > 0.5 and inter_h > 0.5), (
                code,
                event_texts(fig)[i].get_text(),
                event_texts(fig)[j].get_text(),
            )
