"""Limits on what one exec_command may take from the machine beyond CPU, memory and file size
(those are `prlimit`'s, in agent.tools.sandbox): how many processes it may run, and how much it
may write to the workspace.

Processes. A pids cgroup (`pids.max`) holds the command and everything it starts, whatever user
runs it — root included, which RLIMIT_NPROC does not hold. The command joins the cgroup before it
executes (a wrapper writes its own pid to `cgroup.procs`), so a fork bomb never runs outside it.
Where no cgroup can be made (no writable pids hierarchy), the command gets RLIMIT_NPROC instead
(set above the processes its user already has, since the limit counts all of that user's). The
kernel does not hold root to it, so when tapebot runs as root the command runs as the unprivileged
uid 65534 ("nobody"): bubblewrap, still root, sets up the sandbox without a user namespace and
`setpriv` drops to that uid with no capabilities just before the command; the workspace is handed
to that uid so the command can still write there. Only where that cannot be done either does a
command run without a process limit, and the card says so.

Disk. The workspace is measured before the command; while it runs, a watchdog stops it as soon
as it has written more than the budget, and afterwards the files it created are removed, largest
first, until the workspace is within the budget again. What was removed is reported. The
sandbox's private /tmp is a tmpfs of the same size.
"""

from __future__ import annotations

import contextlib
import functools
import os
import secrets
import shutil
import signal
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

# Where a writable pids hierarchy may be: cgroup v1's pids controller, or the v2 unified tree.
_V1_PIDS = Path("/sys/fs/cgroup/pids")
_V2_ROOT = Path("/sys/fs/cgroup")


@dataclass
class PidsCgroup:
    """One command's pids cgroup: made before it starts, emptied and removed after."""

    path: Path

    @classmethod
    def create(cls, max_pids: int) -> PidsCgroup | None:
        """A new cgroup with `pids.max`, or None where none can be made here."""
        for parent in _candidate_parents():
            path = parent / f"tapebot-exec-{os.getpid()}-{secrets.token_hex(4)}"
            try:
                path.mkdir()
            except OSError:
                continue
            try:
                (path / "pids.max").write_text(f"{max_pids}\n")
            except OSError:
                with contextlib.suppress(OSError):
                    path.rmdir()
                continue
            return cls(path)
        return None

    def wrap(self, argv: list[str]) -> list[str]:
        """`argv` run by a shell that first moves itself into the cgroup (then execs)."""
        script = 'echo $$ > "$1/cgroup.procs" && shift && exec "$@"'
        return ["/bin/sh", "-c", script, "tapebot-exec", str(self.path), *argv]

    def pids(self) -> list[int]:
        try:
            return [int(p) for p in (self.path / "cgroup.procs").read_text().split()]
        except (OSError, ValueError):
            return []

    def close(self) -> None:
        """Kill whatever is left in it (a fork bomb's children outlive their group leader) and
        remove it."""
        for _ in range(20):
            left = self.pids()
            if not left:
                break
            for pid in left:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(pid, signal.SIGKILL)
        with contextlib.suppress(OSError):
            self.path.rmdir()


def _candidate_parents() -> list[Path]:
    out = []
    if (_V1_PIDS / "pids.max").exists() or (_V1_PIDS / "cgroup.procs").exists():
        out.append(_V1_PIDS)
    controllers = _V2_ROOT / "cgroup.subtree_control"
    with contextlib.suppress(OSError):
        if "pids" in controllers.read_text().split():
            out.append(_V2_ROOT)
    return out


@functools.cache
def cgroup_available() -> bool:
    """Whether commands get a pids cgroup here (tried once per process)."""
    probe = PidsCgroup.create(8)
    if probe is None:
        return False
    probe.close()
    return True


def user_process_count(uid: int | None = None) -> int:
    """Processes of `uid` (default: ours) right now, from /proc."""
    uid = os.getuid() if uid is None else uid
    count = 0
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            with contextlib.suppress(OSError):
                if entry.stat().st_uid == uid:
                    count += 1
    return count


def nproc_limit(max_pids: int, run_as: int | None = None) -> int | None:
    """RLIMIT_NPROC for a command run by `run_as` (default: our own uid); the limit counts all
    of that user's processes. None for root, which it does not hold."""
    uid = os.getuid() if run_as is None else run_as
    if uid == 0:
        return None
    return user_process_count(uid) + max_pids


# ---- root without a cgroup: the command runs unprivileged ---------------------------------------
UNPRIVILEGED_UID = 65534  # "nobody"


def drop_argv() -> list[str]:
    """`setpriv` switching to UNPRIVILEGED_UID with no capabilities and no supplementary groups,
    in front of the command; [] where there is no setpriv."""
    setpriv = shutil.which("setpriv")
    if setpriv is None:
        return []
    uid = UNPRIVILEGED_UID
    return [
        setpriv,
        f"--reuid={uid}",
        f"--regid={uid}",
        "--clear-groups",
        "--inh-caps=-all",
        "--bounding-set=-all",
        "--",
    ]


def hand_over(root: Path, uid: int = UNPRIVILEGED_UID, keep: frozenset[str] = frozenset()) -> None:
    """Give `root` and everything below it to `uid`, so a command running as it can write there
    (tapebot, as root, still can). Links are not followed; a file with other hard links is left
    as it is (its other name may lie outside the workspace), and so is what `keep` names
    (protected files: real paths) and everything below it."""
    with contextlib.suppress(OSError):
        if root.stat().st_uid != uid:
            os.chown(root, uid, uid)
    for e in _walk(root, keep):
        with contextlib.suppress(OSError):
            st = e.stat(follow_symlinks=False)
            if not e.is_dir(follow_symlinks=False) and not e.is_symlink() and st.st_nlink > 1:
                continue
            if st.st_uid != uid:
                os.lchown(e.path, uid, uid)


def _walk(root: Path, keep: frozenset[str] = frozenset()) -> Iterator[os.DirEntry[str]]:
    """Every entry below `root`, a folder before what it holds; links are not followed, folders
    that cannot be read are passed over, and what `keep` names (real paths) is left out whole."""
    stack = [root]
    while stack:
        folder = stack.pop()
        try:
            entries = list(os.scandir(folder))
        except OSError:
            continue
        for e in entries:
            if keep and os.path.realpath(e.path) in keep:
                continue
            with contextlib.suppress(OSError):
                if e.is_dir(follow_symlinks=False):
                    stack.append(Path(e.path))
            yield e


# ---- disk ---------------------------------------------------------------------------------------
def sizes(root: Path) -> dict[str, int]:
    """Size of every file below `root` (symlinks not followed), by path relative to it."""
    out: dict[str, int] = {}
    for e in _walk(root):
        with contextlib.suppress(OSError):
            if e.is_file(follow_symlinks=False):
                out[os.path.relpath(e.path, root)] = e.stat(follow_symlinks=False).st_size
    return out


def total(files: dict[str, int]) -> int:
    return sum(files.values())


@dataclass
class DiskBudget:
    """What one command may add to the workspace, and what it did."""

    root: Path
    budget: int
    before: dict[str, int] = field(default_factory=dict)
    exceeded: bool = False
    removed: list[tuple[str, int]] = field(default_factory=list)

    def start(self) -> None:
        self.before = sizes(self.root)

    def grown(self) -> int:
        return total(sizes(self.root)) - total(self.before)

    def over(self) -> bool:
        if self.grown() > self.budget:
            self.exceeded = True
        return self.exceeded

    def enforce(self) -> None:
        """After the command: remove files it created, largest first, until within the budget."""
        now = sizes(self.root)
        growth = total(now) - total(self.before)
        if growth <= self.budget and not self.exceeded:
            return
        self.exceeded = True
        created = sorted(((p, s) for p, s in now.items() if p not in self.before), key=lambda x: -x[1])
        for path, size in created:
            if growth <= self.budget:
                break
            with contextlib.suppress(OSError):
                (self.root / path).unlink()
                self.removed.append((path, size))
                growth -= size
        # a file that existed before and grew past the budget is cut back to its old size
        if growth > self.budget:
            for path, size in sorted(now.items(), key=lambda x: -x[1]):
                old = self.before.get(path)
                if old is None or size <= old or growth <= self.budget:
                    continue
                with contextlib.suppress(OSError):
                    os.truncate(self.root / path, old)
                    self.removed.append((f"{path} (cut back to {old:,} bytes)", size - old))
                    growth -= size - old

    def report(self) -> str:
        if not self.exceeded:
            return ""
        mb = self.budget / 1024 / 1024
        gone = ", ".join(f"{p} ({s / 1024 / 1024:,.1f} MB)" for p, s in self.removed) or "nothing"
        return (
            f"[stopped: the command wrote more than its {mb:g} MB budget to the workspace; "
            f"removed to get back within it: {gone}]"
        )
