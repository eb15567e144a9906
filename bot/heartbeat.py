"""Is `tapebot run` alive? A heartbeat file the running process rewrites from its event loop, and
the judgement `tapebot health` (a container's HEALTHCHECK) makes of it.

A file rather than a loopback endpoint: no port to choose, publish or guard, no clash between
replicas sharing a network namespace, nothing new listening; and it proves what matters — the event
loop still turns (a hung loop stops writing, a killed process leaves a stale time). The check runs
where the process runs (`docker exec`, the HEALTHCHECK), so both see the same TAPEBOT_HOME.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import socket
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

HEARTBEAT_S = 10.0
# A beat older than this means the loop is stuck or the process is gone: three missed beats, so a
# long garbage collection or a slow disk is not called a death.
STALE_AFTER_S = 3 * HEARTBEAT_S

State = Literal["starting", "running", "stopping"]


def heartbeat_path(home: Path, host: str | None = None) -> Path:
    """One file per host name: replicas in containers that share a TAPEBOT_HOME volume each have
    their own (a container's host name is its own), and `tapebot health` run inside a container
    reads that container's."""
    name = socket.gethostname() if host is None else host
    safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in name) or "host"
    return home / "run" / f"heartbeat-{safe}.json"


@dataclass(frozen=True, slots=True)
class Beat:
    pid: int
    state: State
    at: float  # seconds since the epoch, when written
    detail: str = ""  # what a "starting" process is waiting for

    def to_json(self) -> str:
        return json.dumps({"pid": self.pid, "state": self.state, "at": self.at, "detail": self.detail})

    @classmethod
    def from_json(cls, text: str) -> Beat:
        raw = json.loads(text)
        state = raw["state"]
        if state not in ("starting", "running", "stopping"):
            raise ValueError(f"unknown state {state!r}")
        return cls(int(raw["pid"]), state, float(raw["at"]), str(raw.get("detail", "")))


class Heartbeat:
    """Owned by `run_bot`: `start()` begins beating, `set()` changes what the beats say, `stop()`
    removes the file (a stopped bot is not mistaken for a stale one)."""

    def __init__(
        self, path: Path, *, interval: float = HEARTBEAT_S, clock: Callable[[], float] = time.time
    ) -> None:
        self.path = path
        self.interval = interval
        self._clock = clock
        self._state: State = "starting"
        self._detail = ""
        self._task: asyncio.Task[None] | None = None

    def set(self, state: State, detail: str = "") -> None:
        self._state, self._detail = state, detail
        self.write()

    def write(self) -> None:
        """One beat, replaced atomically: a reader never sees half a file."""
        beat = Beat(os.getpid(), self._state, self._clock(), self._detail)
        self.path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        tmp = self.path.with_name(f".{self.path.name}.{os.getpid()}")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)  # private, as all of home
        with os.fdopen(fd, "w") as f:
            f.write(beat.to_json())
        os.replace(tmp, self.path)

    def start(self) -> None:
        self.write()
        self._task = asyncio.get_running_loop().create_task(self._beat(), name="heartbeat")

    async def _beat(self) -> None:
        while True:
            await asyncio.sleep(self.interval)
            with contextlib.suppress(OSError):  # a full disk: the next beat tries again
                self.write()

    async def stop(self) -> None:
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        with contextlib.suppress(FileNotFoundError):
            self.path.unlink()


@dataclass(frozen=True, slots=True)
class Verdict:
    healthy: bool
    line: str


def judge(path: Path, now: float, *, stale_after: float = STALE_AFTER_S) -> Verdict:
    """Healthy only when the process says it is running and said so within `stale_after`."""
    try:
        beat = Beat.from_json(path.read_text())
    except FileNotFoundError:
        return Verdict(False, f"not running: no heartbeat at {path} (is `tapebot run` started here?)")
    except (OSError, ValueError, KeyError, TypeError) as exc:
        return Verdict(False, f"unreadable heartbeat at {path}: {type(exc).__name__}: {exc}")
    age = now - beat.at
    if age > stale_after:
        return Verdict(
            False,
            f"not answering: the last heartbeat (pid {beat.pid}, {beat.state}) is {age:.0f} s old "
            f"(more than {stale_after:.0f} s): the process is hung or was killed",
        )
    if beat.state == "starting":
        why = f": {beat.detail}" if beat.detail else ""
        return Verdict(False, f"starting (pid {beat.pid}){why}")
    if beat.state == "stopping":
        return Verdict(False, f"stopping (pid {beat.pid})")
    return Verdict(True, f"running (pid {beat.pid}, last heartbeat {max(age, 0):.0f} s ago)")
