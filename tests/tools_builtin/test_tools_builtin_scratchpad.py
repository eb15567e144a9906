"""Scratchpad: one JSONL file per turn under traces/<date>/, everything redacted."""

from __future__ import annotations

import dataclasses
import json
import math
from datetime import date, datetime
from pathlib import Path

import pytest

from agent.redact import Redactor
from agent.scratchpad import BackgroundWriter, NullScratchpad, Scratchpad, prune_traces


def read_trace(path):
    """All events of one trace file."""
    with open(path, encoding="utf-8") as fh:
        return [json.loads(line) for line in fh if line.strip()]


@dataclasses.dataclass
class FakeCall:
    id: str
    name: str
    arguments: dict


def test_writes_redacted_jsonl(tmp_path: Path, secret):
    traces = tmp_path / "traces"
    when = datetime(2025, 3, 4, 9, 30).astimezone()
    pad = Scratchpad(traces, "turn-42", "sess-1", Redactor([secret]), now=when)
    assert pad.path == traces / "2025-03-04" / "turn-42.jsonl"
    pad.record("input", text=f"my key is {secret}", user_id="u1")
    pad.record("model_call", model="main", request={"headers": {"Authorization": "Bearer xyz"}})
    with pad.span(
        "tool_call", call=FakeCall("c1", "exec_command", {"command": "env", "api_key": "k1234567"})
    ):
        pass
    pad.record(
        "tool_result", call_id="c1", content="OPENAI_API_KEY=sk-proj-abcdefghijklmnopqrstu", score=math.nan
    )
    pad.record("usage", input_tokens=100, output_tokens=20, cost=0.001)
    pad.record("final", text="done")
    pad.close()
    pad.record("final", text="after close is ignored")

    raw = pad.path.read_text()
    assert secret not in raw and "xyz" not in raw and "k1234567" not in raw and "sk-proj" not in raw
    events = read_trace(pad.path)
    kinds = [e["kind"] for e in events]
    assert kinds == ["start", "input", "model_call", "tool_call", "tool_result", "usage", "final"]
    assert [e["seq"] for e in events] == list(range(1, 8))
    assert events[0]["turn_id"] == "turn-42" and events[0]["session_id"] == "sess-1"
    assert events[1]["text"] == "my key is ***"
    tool = events[3]
    assert tool["ok"] is True and tool["duration_ms"] >= 0
    assert tool["call"]["name"] == "exec_command" and tool["call"]["arguments"]["api_key"] == "***"
    assert events[4]["score"] == "nan"
    assert events[5]["input_tokens"] == 100  # usage counters are not "tokens" secrets


def test_span_records_errors_and_error_kind_flushes(tmp_path: Path):
    pad = Scratchpad(tmp_path, "t1", redactor=Redactor())
    with pytest.raises(ValueError), pad.span("tool_call", name="x"):
        raise ValueError("bad input")
    pad.record("error", error="provider exploded")
    # flushed without close: error records are written through
    events = read_trace(pad.path)
    assert events[-2]["ok"] is False and "ValueError: bad input" in events[-2]["error"]
    assert events[-1]["kind"] == "error"
    pad.close()


def test_context_manager_records_exception(tmp_path: Path):
    with pytest.raises(RuntimeError), Scratchpad(tmp_path, "t2") as pad:
        pad.record("input", text="hi")
        raise RuntimeError("crash")
    events = read_trace(pad.path)
    assert events[-1]["kind"] == "error" and "crash" in events[-1]["error"]


def test_turn_id_is_sanitised_and_long_strings_cut(tmp_path: Path):
    pad = Scratchpad(tmp_path, "../../evil/turn", max_string=10)
    pad.record("thinking", text="x" * 50)
    pad.close()
    assert pad.path.parent.parent == tmp_path and ".." not in pad.path.name
    assert read_trace(pad.path)[1]["text"].startswith("x" * 10 + "…[truncated 40")


def test_unwritable_trace_never_raises(tmp_path: Path):
    blocker = tmp_path / "file"
    blocker.write_text("not a dir")
    pad = Scratchpad(blocker, "t")  # traces dir is a file: cannot create
    pad.record("input", text="x")
    pad.close()


def test_null_scratchpad():
    pad = NullScratchpad()
    pad.record("input", text="x")
    with pad.span("tool_call") as extra:
        extra["a"] = 1
    pad.flush()
    pad.close()


def test_prune(tmp_path: Path):
    for d in ("2025-01-01", "2025-01-20", "2025-02-01", "not-a-date"):
        (tmp_path / d).mkdir()
    assert prune_traces(tmp_path, keep_days=14, today=date(2025, 2, 1)) == 1
    assert sorted(p.name for p in tmp_path.iterdir()) == ["2025-01-20", "2025-02-01", "not-a-date"]


def test_json_lines_are_compact_and_valid(tmp_path: Path):
    pad = Scratchpad(tmp_path, "t3")
    pad.record("note", text="中文 ok", path=tmp_path)
    pad.close()
    lines = pad.path.read_text(encoding="utf-8").splitlines()
    assert all(json.loads(line) for line in lines)
    assert "中文 ok" in lines[1]


def test_values_the_fast_encoder_refuses_are_still_written(tmp_path: Path):
    """orjson refuses integers beyond 64 bits; the line is written by the standard library then."""
    sp = Scratchpad(tmp_path, "t_big", "s")
    sp.record("tool_call", arguments={"qty": 2**70, "price": 1.5, "名称": "贵州茅台"})
    sp.close()
    events = read_trace(sp.path)
    assert events[-1]["arguments"] == {"qty": 2**70, "price": 1.5, "名称": "贵州茅台"}


def test_a_record_keeps_its_values_as_they_were_when_recorded(tmp_path: Path, secret):
    """Lines are made when the turn's trace is written (off the event loop): a container the
    caller changes after `record()` is traced as it was, and still redacted."""
    pad = Scratchpad(tmp_path, "t_later", "s", Redactor([secret]))
    arguments = {"command": f"echo {secret}", "api_key": "k1234567"}
    pad.record("tool_call", arguments=arguments, text=f"key {secret}")
    arguments["command"] = "changed"
    arguments["extra"] = 1
    pad.close()
    raw = pad.path.read_text()
    assert secret not in raw and "k1234567" not in raw
    call = read_trace(pad.path)[-1]
    assert call["arguments"] == {"command": "echo ***", "api_key": "***"}
    assert call["text"] == "key ***"


def test_background_writer_batches_and_writes_everything_on_close(tmp_path: Path, secret):
    """The bot's writer: turns' traces handed over in a burst are written by its thread, every
    value redacted there; `close()` writes whatever is still queued."""
    writer = BackgroundWriter(batch_delay=0.5)
    pads = [Scratchpad(tmp_path, f"t{i}", "s", Redactor([secret]), writer=writer) for i in range(20)]
    for i, pad in enumerate(pads):
        pad.record("input", text=f"{i}: {secret}")
        pad.record("final", text="ok")
        pad.close()
    writer.close()
    for i, pad in enumerate(pads):
        events = read_trace(pad.path)
        assert [e["kind"] for e in events] == ["start", "input", "final"]
        assert events[1]["text"] == f"{i}: ***"
        assert events[0]["started_at"]  # an ISO local time, made by the writer
        datetime.fromisoformat(events[0]["started_at"])
    assert secret not in "".join(p.path.read_text() for p in pads)
    # a writer closed once starts again for a late trace (and is closed again)
    late = Scratchpad(tmp_path, "late", writer=writer)
    late.close()
    writer.close()
    assert late.path.exists()


def test_background_writer_wakes_again_after_a_batch(tmp_path: Path):
    """A trace handed over after the thread wrote its last batch and went back to sleep is written
    without waiting for `close()`."""
    import time

    def written(n: int) -> bool:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if writer.lines >= n:
                return True
            time.sleep(0.01)
        return False

    writer = BackgroundWriter(batch_delay=0.001)
    try:
        for i in range(1, 6):
            pad = Scratchpad(tmp_path, f"t{i}", writer=writer)
            pad.close()
            assert written(i)  # the start line of each, one after the other
            assert read_trace(pad.path)[0]["kind"] == "start"
    finally:
        writer.close()
