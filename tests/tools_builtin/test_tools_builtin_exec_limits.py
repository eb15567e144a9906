"""exec_command's process and disk limits, run for real ("fork
bomb" and "disk fill"). A fork bomb ends inside the sandbox with the host's process count barely
moving; a command that writes past its budget is stopped, what it wrote is removed and the output
says so; the sandbox's /tmp is bounded too; the approval card states the limits."""

from __future__ import annotations

import os
import shutil
import threading
import time
from pathlib import Path

import pytest

from agent.tools import exec_limits, sandbox
from agent.tools.builtin.shell import exec_command_impl
from agent.tools.workspace import LocalToolPolicy
from bot.cards import exec_note
from tests.fakes.waits import eventually_sync

needs_sandbox = pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap (bwrap) not installed")


def _can_limit(policy: LocalToolPolicy) -> bool:
    return os.getuid() != 0 or exec_limits.cgroup_available() or sandbox.unprivileged_works(policy)


def _processes() -> int:
    """Processes descending from this test's process: what the command started, whatever else
    the (shared, busy) machine runs meanwhile."""
    parents: dict[int, int] = {}
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                with open(f"/proc/{name}/stat", encoding="utf-8", errors="replace") as f:
                    parents[int(name)] = int(f.read().rsplit(")", 1)[1].split()[1])
            except (OSError, ValueError, IndexError):
                continue
    mine, me = 0, os.getpid()
    for pid in parents:
        seen, p = 0, pid
        while p in parents and p != me and seen < 64:
            p, seen = parents[p], seen + 1
        mine += p == me and pid != me
    return mine


@pytest.fixture(params=["as found", "no cgroup"])
def limited(request, policy: LocalToolPolicy, monkeypatch) -> LocalToolPolicy:
    """The limits as this machine gives them (a pids cgroup where one can be made), and as a
    machine without a writable cgroup gives them: RLIMIT_NPROC, which holds root only because the
    command then runs as an unprivileged uid."""
    if request.param == "no cgroup":
        monkeypatch.setattr(exec_limits.PidsCgroup, "create", classmethod(lambda cls, _n: None))
        monkeypatch.setattr(exec_limits, "cgroup_available", lambda: False)
    policy.exec_max_processes = 48
    policy.exec_disk_mb = 20
    return policy


@needs_sandbox
async def test_fork_bomb_ends_inside_the_sandbox(limited):
    """Fork bomb: the bomb hits the process limit inside the sandbox, the host's process count
    barely moves, and nothing of it outlives the call. Root included: RLIMIT_NPROC does not hold
    uid 0, so without a cgroup the command runs as an unprivileged uid."""
    if not _can_limit(limited):
        pytest.skip("root without a pids cgroup, setpriv or bubblewrap without a user namespace")
    before = _processes()
    peak = [before]
    stop = threading.Event()

    def watch() -> None:
        while not stop.is_set():
            peak[0] = max(peak[0], _processes())
            time.sleep(0.02)

    watcher = threading.Thread(target=watch)
    watcher.start()
    try:
        out = await exec_command_impl(limited, "f(){ f | f & }; f; sleep 2; echo survived", 15)
    finally:
        stop.set()
        watcher.join()
    # under a cgroup the command's own shell goes on; under RLIMIT_NPROC dash gives up when its
    # own fork fails, which ends the bomb as well
    assert "survived" in out or "Cannot fork" in out
    assert "fork" in out.lower()  # "Cannot fork" / "Resource temporarily unavailable"
    # the limit and a little slack for the sandbox's own processes and other work on the machine
    assert peak[0] - before <= limited.exec_max_processes + 30, (before, peak[0])
    assert eventually_sync(lambda: _processes() - before <= 10)  # nothing of it is left behind


@needs_sandbox
async def test_disk_fill_is_stopped_removed_and_reported(limited):
    out = await exec_command_impl(limited, "dd if=/dev/zero of=big.bin bs=1M count=3000", 60)
    assert "[stopped: the command wrote more than its 20 MB budget to the workspace" in out
    assert "big.bin" in out
    assert not (limited.workspace / "big.bin").exists()
    assert exec_limits.total(exec_limits.sizes(limited.workspace)) <= 20 * 1024 * 1024


@needs_sandbox
async def test_a_file_that_grows_past_the_budget_is_cut_back(limited):
    notes = limited.workspace / "notes.txt"
    notes.write_text("keep me\n")
    out = await exec_command_impl(limited, "head -c 60000000 /dev/zero >> notes.txt", 60)
    assert "cut back" in out and notes.read_text() == "keep me\n"


@needs_sandbox
async def test_writes_within_the_budget_stay(limited):
    out = await exec_command_impl(limited, "head -c 1000000 /dev/zero > ok.bin && echo written", 30)
    assert "written" in out and "[stopped" not in out
    assert (limited.workspace / "ok.bin").stat().st_size == 1_000_000


@needs_sandbox
async def test_the_sandbox_tmp_is_bounded_too(limited):
    out = await exec_command_impl(limited, "dd if=/dev/zero of=/tmp/x bs=1M count=200 2>&1; echo rc=$?", 30)
    assert "No space left on device" in out and "rc=1" in out


@needs_sandbox
def test_the_card_states_the_limits(limited):
    note = exec_note(limited, "en")
    summary = sandbox.limits_summary(limited)
    assert f"at most {summary['processes']} processes, 20 MB written to the workspace" in note
    assert "限制：最多" in exec_note(limited, "zh")


def test_disk_budget_removes_the_largest_new_files_first(tmp_path: Path):
    (tmp_path / "old.txt").write_text("x" * 10)
    budget = exec_limits.DiskBudget(tmp_path, 1000)
    budget.start()
    (tmp_path / "a.bin").write_bytes(b"a" * 800)
    (tmp_path / "b.bin").write_bytes(b"b" * 3000)
    budget.enforce()
    assert [p for p, _ in budget.removed] == ["b.bin"]
    assert (tmp_path / "a.bin").exists() and (tmp_path / "old.txt").exists()


@needs_sandbox
async def test_without_a_cgroup_root_runs_the_command_unprivileged(policy, monkeypatch):
    """Root without a cgroup: the command runs as the unprivileged uid, with no capabilities and
    under RLIMIT_NPROC, yet still writes the workspace and /tmp; the workspace's files stay
    readable and writable for tapebot."""
    if os.getuid() != 0 or not sandbox.unprivileged_works(policy):
        pytest.skip("only root drops to an unprivileged uid (and only where setpriv and bwrap allow it)")
    monkeypatch.setattr(exec_limits.PidsCgroup, "create", classmethod(lambda cls, _n: None))
    (policy.workspace).mkdir(parents=True, exist_ok=True)
    (policy.workspace / "mine.txt").write_text("from tapebot\n")
    out = await exec_command_impl(
        policy,
        "id -u; grep -E 'CapEff|NoNewPrivs' /proc/self/status; ulimit -p 2>/dev/null; "
        "cat /proc/self/limits | grep -i 'max processes'; echo more >> mine.txt; echo t > /tmp/t && echo tmp-ok",
        30,
    )
    assert str(exec_limits.UNPRIVILEGED_UID) in out.splitlines(), out
    assert "CapEff:\t0000000000000000" in out and "NoNewPrivs:\t1" in out
    assert "unlimited" not in next(line for line in out.splitlines() if line.startswith("Max processes"))
    assert "tmp-ok" in out
    assert (policy.workspace / "mine.txt").read_text() == "from tapebot\nmore\n"


def test_hand_over_leaves_hard_linked_and_protected_files_alone(tmp_path: Path):
    outside = tmp_path / "outside.txt"
    outside.write_text("not the workspace's")
    ws = tmp_path / "ws"
    (ws / "sub").mkdir(parents=True)
    (ws / "sub" / "a.txt").write_text("a")
    os.link(outside, ws / "linked.txt")
    if os.getuid() != 0:
        pytest.skip("chown to another uid needs root")
    (ws / "secret.env").write_text("protected")
    exec_limits.hand_over(ws, keep=frozenset({os.path.realpath(ws / "secret.env")}))
    uid = exec_limits.UNPRIVILEGED_UID
    assert (ws / "sub").stat().st_uid == uid and (ws / "sub" / "a.txt").stat().st_uid == uid
    assert outside.stat().st_uid == 0 and (ws / "secret.env").stat().st_uid == 0
