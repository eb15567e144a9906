"""`tapebot health`: the heartbeat `tapebot run` writes and the verdict read from it — fresh and
running is healthy; missing, stale, starting, stopping or unreadable is not, with one line why."""

from __future__ import annotations

import asyncio
import io
import json
import stat
from datetime import UTC, datetime

from hypothesis import given
from hypothesis import strategies as st

from bot.cli import CliContext
from bot.cli.health import main as health_main
from bot.heartbeat import STALE_AFTER_S, Heartbeat, heartbeat_path, judge

T0 = 1_800_000_000.0


def _beat(home, state, at=T0, detail=""):
    hb = Heartbeat(heartbeat_path(home), clock=lambda: at)
    hb.set(state, detail)
    return hb


def test_a_fresh_running_beat_is_healthy(tmp_path):
    _beat(tmp_path, "running")
    v = judge(heartbeat_path(tmp_path), T0 + 5)
    assert v.healthy and "running" in v.line


def test_a_stale_beat_means_hung_or_killed(tmp_path):
    _beat(tmp_path, "running")
    v = judge(heartbeat_path(tmp_path), T0 + STALE_AFTER_S + 1)
    assert not v.healthy and "hung or was killed" in v.line


def test_starting_says_what_it_waits_for(tmp_path):
    _beat(tmp_path, "starting", detail="waiting for the database")
    v = judge(heartbeat_path(tmp_path), T0 + 1)
    assert not v.healthy and v.line.endswith("waiting for the database")


def test_stopping_is_not_healthy(tmp_path):
    _beat(tmp_path, "stopping")
    assert not judge(heartbeat_path(tmp_path), T0).healthy


def test_no_heartbeat_names_the_file(tmp_path):
    v = judge(heartbeat_path(tmp_path), T0)
    assert not v.healthy and str(heartbeat_path(tmp_path)) in v.line and "not running" in v.line


async def test_the_beat_is_private_and_removed_on_stop(tmp_path):
    hb = Heartbeat(heartbeat_path(tmp_path), interval=3600, clock=lambda: T0)
    hb.start()
    path = heartbeat_path(tmp_path)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert json.loads(path.read_text())["state"] == "starting"
    await hb.stop()
    assert not path.exists()


async def test_the_loop_keeps_beating(tmp_path):
    now = [T0]
    hb = Heartbeat(heartbeat_path(tmp_path), interval=0, clock=lambda: now[0])
    hb.set("running")
    hb.start()
    now[0] = T0 + 1000  # without the beats, this file would be 1000 s stale
    for _ in range(5):
        await asyncio.sleep(0)
    try:
        assert judge(heartbeat_path(tmp_path), T0 + 1001).healthy
    finally:
        await hb.stop()


@given(st.binary(max_size=200))
def test_any_file_content_gives_a_verdict_never_a_crash(tmp_path_factory, data):
    home = tmp_path_factory.mktemp("h")
    path = heartbeat_path(home)
    path.parent.mkdir(parents=True)
    path.write_bytes(data)
    v = judge(path, T0)
    assert v.line and "\n" not in v.line
    if v.healthy:  # only a well-formed, fresh "running" beat is healthy
        assert json.loads(data)["state"] == "running"


def _cli(home, now):
    out, err = io.StringIO(), io.StringIO()
    ctx = CliContext(home=home, environ={}, stdout=out, stderr=err, now=lambda: now)
    return health_main(ctx), out.getvalue(), err.getvalue()


def test_cli_exit_status_and_one_line(tmp_path):
    rc, out, err = _cli(tmp_path, datetime.fromtimestamp(T0, UTC))
    assert rc == 1 and out == "" and err.count("\n") == 1 and err.startswith("tapebot health: not running")
    _beat(tmp_path, "running")
    rc, out, err = _cli(tmp_path, datetime.fromtimestamp(T0 + 3, UTC))
    assert rc == 0 and out.startswith("tapebot health: running") and err == ""
    rc, _, err = _cli(tmp_path, datetime.fromtimestamp(T0 + 600, UTC))
    assert rc == 1 and "600 s old" in err


def test_replicas_sharing_a_home_each_have_their_own_beat(tmp_path):
    a, b = heartbeat_path(tmp_path, "replica-a"), heartbeat_path(tmp_path, "replica-b")
    assert a != b and a.parent == b.parent
    Heartbeat(a, clock=lambda: T0).set("running")
    assert judge(a, T0).healthy and not judge(b, T0).healthy
    assert heartbeat_path(tmp_path, "../../etc").parent == tmp_path / "run"
