"""Per-turn JSONL trace: traces/<YYYY-MM-DD>/<turn_id>.jsonl.

One line per event (input, thinking, model_call, tool_call, tool_result, compaction, retry, usage,
final, error), every value passed through the Redactor. Called from the hot loop, so a record only
keeps its fields (containers copied, since the caller may change them afterwards): redacting them,
encoding the lines and writing the file happen when the turn ends (`close()`), on `flush()`, and at
once for `error` records — in the `TraceWriter`'s thread. `DirectWriter` does it in the caller's
thread (the terminal, tests, tools run outside the bot); the bot uses a `BackgroundWriter`, which
takes the ended turns of a moment in one batch on a thread of its own, so the event loop spends
neither the redaction, nor the encoding, nor the file creation (a filesystem metadata operation,
0.1–0.6 ms on some disks) on a trace. A trace that cannot be written costs one warning; it never
fails the turn.
"""

from __future__ import annotations

import dataclasses
import enum
import functools
import json
import logging
import math
import os
import queue
import re
import shutil
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import date, datetime, timedelta
from pathlib import Path
from types import TracebackType
from typing import Any, Protocol

import orjson

from agent.redact import MASK, Redactor, is_sensitive_key

log = logging.getLogger(__name__)

KINDS = frozenset(
    {
        "start",
        "input",
        "thinking",
        "model_call",
        "tool_call",
        "tool_result",
        "compaction",
        "final",
        "error",
        "retry",
        "usage",
        "approval",
        "note",
    }
)
MAX_STRING = 200_000  # longer strings are cut (a spilled tool result is referenced, not copied)
_SAFE_ID = re.compile(r"[^A-Za-z0-9_\-]")
# the standard library's encoder, for what orjson refuses (integers beyond 64 bits)
_LINE = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), default=str)


def _line(entry: dict[str, Any]) -> str:
    try:
        return orjson.dumps(entry, default=str).decode() + "\n"
    except TypeError:
        return _LINE.encode(entry) + "\n"


def to_jsonable(obj: Any, max_string: int = MAX_STRING, _depth: int = 0) -> Any:
    """Plain JSON values from messages, dataclasses, pydantic models, paths, enums, bytes..."""
    if obj is None or isinstance(obj, bool | int):
        return obj
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else str(obj)
    if isinstance(obj, str):
        if len(obj) > max_string:
            return obj[:max_string] + f"…[truncated {len(obj) - max_string} chars]"
        return obj
    if _depth > 20:
        return "…[nested too deep]"
    d = _depth + 1
    if isinstance(obj, dict):
        return {str(k): to_jsonable(v, max_string, d) for k, v in obj.items()}
    if isinstance(obj, list | tuple | set | frozenset):
        return [to_jsonable(v, max_string, d) for v in obj]
    if isinstance(obj, bytes | bytearray):
        return f"<{len(obj)} bytes>"
    if isinstance(obj, enum.Enum):
        return to_jsonable(obj.value, max_string, d)
    if isinstance(obj, datetime | date):
        return obj.isoformat()
    if isinstance(obj, Path):
        return str(obj)
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return {f.name: to_jsonable(getattr(obj, f.name), max_string, d) for f in dataclasses.fields(obj)}
    dump = getattr(obj, "model_dump", None)  # pydantic
    if callable(dump):
        try:
            return to_jsonable(dump(mode="json"), max_string, d)
        except Exception:  # noqa: BLE001 — an odd model_dump falls through to the generic conversions below
            pass
    if isinstance(obj, BaseException):
        return f"{type(obj).__name__}: {obj}"
    return to_jsonable(str(obj), max_string, d)


def redacted_jsonable(obj: Any, redactor: Redactor, max_string: int = MAX_STRING, _depth: int = 0) -> Any:
    """`redactor.value(to_jsonable(obj))` in one pass: the same JSON values, with the same secrets
    masked (sensitive keys, sensitive (name, value) pairs, every string), without building the
    unredacted copy first. Traces call this several times a turn."""
    if isinstance(obj, str):
        if len(obj) > max_string:
            obj = obj[:max_string] + f"…[truncated {len(obj) - max_string} chars]"
        return redactor.text(obj)
    if obj is None or isinstance(obj, bool | int):
        return obj
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else redactor.text(str(obj))
    if _depth > 20:
        return redactor.text("…[nested too deep]")
    d = _depth + 1
    if isinstance(obj, dict):
        return _redacted_mapping(obj.items(), redactor, max_string, d)
    if isinstance(obj, list | tuple | set | frozenset):
        items = obj if isinstance(obj, list | tuple) else list(obj)  # a set in its iteration order
        if len(items) == 2:
            first = to_jsonable(items[0], max_string, d)
            if isinstance(first, str) and is_sensitive_key(first):  # ("Authorization", "…")
                return [first, MASK]
        return [redacted_jsonable(v, redactor, max_string, d) for v in items]
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        fields = ((f.name, getattr(obj, f.name)) for f in dataclasses.fields(obj))
        return _redacted_mapping(fields, redactor, max_string, d)
    if isinstance(obj, enum.Enum):
        return redacted_jsonable(obj.value, redactor, max_string, d)
    # everything else becomes one string, as `to_jsonable` makes it
    plain = to_jsonable(obj, max_string, _depth)
    return redactor.value(plain)


def _redacted_mapping(items: Any, redactor: Redactor, max_string: int, depth: int) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in items:
        if not isinstance(key, str):
            key = str(key)
        clean = redacted_jsonable(value, redactor, max_string, depth)
        if is_sensitive_key(key) and clean not in (None, "", [], {}):
            clean = MASK
        out[key] = clean
    return out


Render = Callable[[], list[str]]


class TraceWriter(Protocol):
    def write(self, path: str, render: Render) -> None:
        """Append the lines `render()` makes (each ending in a newline) to the file at `path`,
        creating it. `render` redacts and encodes: it is called once, in the writer's thread."""
        ...


class DirectWriter:
    """Writes in the caller's thread (the terminal, tests, tools run outside the bot). Three system
    calls per write (open, write, close; `open(path, "a")` makes eight): on the bot's writer thread
    each one is a round of the GIL with the event loop, and on some disks a file is costly."""

    def __init__(self) -> None:
        self._failed: set[str] = set()
        self._folders: set[str] = set()  # made already: one mkdir per day, not per turn
        self.lines = 0  # written (benches count them)

    def write(self, path: str, render: Render) -> None:
        if path in self._failed:
            return
        lines = render()
        if not lines:
            return
        self.lines += len(lines)
        try:
            data = memoryview("".join(lines).encode("utf-8", "replace"))  # lone surrogates: "?"
            folder = os.path.dirname(path)
            if folder not in self._folders:
                os.makedirs(folder, mode=0o700, exist_ok=True)
                self._folders.add(folder)
            try:  # traces hold conversations: private whatever the umask
                fd = os.open(path, _APPEND, 0o600)
            except FileNotFoundError:  # the folder was removed meanwhile (pruned)
                self._folders.discard(folder)
                os.makedirs(folder, mode=0o700, exist_ok=True)
                fd = os.open(path, _APPEND, 0o600)
            try:
                while data:
                    data = data[os.write(fd, data) :]
            finally:
                os.close(fd)
        except OSError as exc:
            self._failed.add(path)
            log.warning("trace %s not written: %s", path, exc)


_APPEND = os.O_WRONLY | os.O_APPEND | os.O_CREAT | getattr(os, "O_CLOEXEC", 0)


class _Worker:
    """One writer thread and how to wake or stop it."""

    def __init__(self) -> None:
        self.wake: queue.SimpleQueue[None] = queue.SimpleQueue()
        self.asleep = False  # waits (or is about to wait) for a token
        self.stopping = False
        self.thread: threading.Thread | None = None


class BackgroundWriter:
    """Renders and writes trace files on one thread of its own, in the order they were handed
    over. The thread wakes once for what a moment brings (`batch_delay` after the first of them),
    not once per turn: 200 chats answering at once hand the GIL over a few times instead of 200.
    No lock is shared with the event loop (a thread preempted while holding one would stall the
    loop): the queue is a deque, the wake-up a token. `close()` writes what is queued and stops
    the thread (the App does it at shutdown)."""

    def __init__(self, batch_delay: float = 0.05) -> None:
        self.batch_delay = batch_delay
        self._queue: deque[tuple[str, Render]] = deque()
        self._worker: _Worker | None = None
        self._start_lock = threading.Lock()
        self._direct = DirectWriter()

    def start(self) -> None:
        """Start the thread now (the App does at start-up) rather than in the first turn."""
        self._start()

    def write(self, path: str, render: Render) -> None:
        worker = self._worker or self._start()
        self._queue.append((path, render))
        if worker.asleep:
            worker.asleep = False
            worker.wake.put(None)

    def _start(self) -> _Worker:
        with self._start_lock:
            if self._worker is None:
                worker = _Worker()
                worker.thread = threading.Thread(
                    target=self._run, args=(worker,), name="trace-writer", daemon=True
                )
                worker.thread.start()
                self._worker = worker
            return self._worker

    def _run(self, worker: _Worker) -> None:
        while True:
            worker.asleep = True
            # checked after saying so: a write in between is either seen here or sends a token
            if not self._queue and not worker.stopping:
                worker.wake.get()
            worker.asleep = False
            if not worker.stopping:
                time.sleep(self.batch_delay)  # let the moment's other turns join this batch
            while self._queue:
                try:
                    path, render = self._queue.popleft()
                except IndexError:  # a thread started after a close took it
                    break
                self._direct.write(path, render)
            if worker.stopping and not self._queue:
                return

    @property
    def lines(self) -> int:
        """Lines written so far (benches count them)."""
        return self._direct.lines

    def close(self, timeout: float = 10.0) -> None:
        with self._start_lock:
            worker, self._worker = self._worker, None
        if worker is not None and worker.thread is not None:
            worker.stopping = True
            worker.wake.put(None)
            worker.thread.join(timeout)


_DIRECT = DirectWriter()
# Values that cannot change after `record()`: kept as they are until the line is made. Anything
# else (a dict, a list, a model) is copied into plain JSON values at once.
_IMMUTABLE = frozenset({str, int, float, bool, type(None), datetime, date})


@functools.lru_cache(maxsize=64)
def _day_folder(traces_dir: str, day: str) -> str:
    return os.path.join(traces_dir, day)


# (minute, local date): a local day begins on a whole minute in every time zone, so a turn's
# folder name is made once a minute, not per turn
_DAY: tuple[int, str] = (-1, "")


def _local_day(wall: float) -> str:
    global _DAY
    minute = int(wall // 60)
    cached = _DAY
    if cached[0] == minute:
        return cached[1]
    day = time.strftime("%Y-%m-%d", time.localtime(wall))
    _DAY = (minute, day)
    return day


class Scratchpad:
    """The JSONL trace of one turn. Not thread-safe; one per turn, used from the turn's task."""

    def __init__(
        self,
        traces_dir: Path | str,
        turn_id: str,
        session_id: str = "",
        redactor: Redactor | None = None,
        *,
        now: datetime | None = None,
        max_string: int = MAX_STRING,
        writer: TraceWriter | None = None,
    ):
        self._t0, self._wall0 = time.perf_counter(), time.time()
        if now is None:
            day = _local_day(self._wall0)
            started: datetime | float = self._wall0  # a local datetime when the line is made
        else:
            day, started = now.strftime("%Y-%m-%d"), now
        safe_turn = _SAFE_ID.sub("_", turn_id) or "turn"
        self._path = os.path.join(_day_folder(str(traces_dir), day), f"{safe_turn}.jsonl")
        self.turn_id = turn_id
        self.session_id = session_id
        self.redactor = redactor or Redactor()
        self.max_string = max_string
        self.writer = writer or _DIRECT
        self._seq = 0
        # (seq, perf_counter, kind, fields) per record, made into lines by `_render`
        self._entries: list[tuple[int, float, str, dict[str, Any]]] = []
        self._disabled = False
        self._closed = False
        self.record("start", turn_id=turn_id, session_id=session_id, started_at=started)

    @property
    def path(self) -> Path:
        return Path(self._path)

    # -- writing --------------------------------------------------------------------------------
    def record(self, kind: str, **fields: Any) -> None:
        """Append one event. Unknown kinds are allowed (recorded as given)."""
        if self._disabled or self._closed:
            return
        try:
            for key, value in fields.items():
                if type(value) not in _IMMUTABLE:  # the caller may change it after this call
                    fields[key] = to_jsonable(value, self.max_string)
            self._seq += 1
            self._entries.append((self._seq, time.perf_counter(), kind, fields))
        except Exception as exc:  # noqa: BLE001 — tracing must never break a turn
            self._disabled = True
            log.warning("trace %s disabled: %s", self._path, exc)
            return
        if kind == "error":
            self.flush()

    def _render(self, entries: list[tuple[int, float, str, dict[str, Any]]]) -> list[str]:
        """The entries as redacted JSON lines (in the writer's thread)."""
        lines = []
        for seq, perf, kind, fields in entries:
            try:
                started = fields.get("started_at") if kind == "start" else None
                if isinstance(started, float):
                    fields["started_at"] = datetime.fromtimestamp(started).astimezone()
                t = perf - self._t0
                entry = {"seq": seq, "t": round(t, 4), "ts": round(self._wall0 + t, 3), "kind": kind}
                for key, value in redacted_jsonable(fields, self.redactor, self.max_string).items():
                    entry.setdefault(key, value)  # the header fields cannot be overwritten
                lines.append(_line(entry))
            except Exception as exc:  # noqa: BLE001 — a record that cannot be encoded is left out
                log.warning("trace %s: a %s record left out: %s", self._path, kind, exc)
        return lines

    @contextmanager
    def span(self, kind: str, **fields: Any) -> Iterator[dict[str, Any]]:
        """Time a block and record it once at the end with duration_ms and ok/error. The yielded
        dict can be filled with more fields (e.g. a result preview) inside the block."""
        extra: dict[str, Any] = {}
        start = time.perf_counter()
        try:
            yield extra
        except BaseException as exc:
            ms = round((time.perf_counter() - start) * 1000, 2)
            self.record(
                kind, **fields, **extra, duration_ms=ms, ok=False, error=f"{type(exc).__name__}: {exc}"
            )
            raise
        ms = round((time.perf_counter() - start) * 1000, 2)
        self.record(kind, **fields, **extra, duration_ms=ms, ok=True)

    def flush(self) -> None:
        """Hand the records kept so far to the writer."""
        entries, self._entries = self._entries, []
        if entries:
            try:
                self.writer.write(self._path, lambda: self._render(entries))
            except Exception as exc:  # noqa: BLE001 — a writer must not fail the turn either
                self._disabled = True
                log.warning("trace %s disabled: %s", self._path, exc)

    def close(self) -> None:
        if self._closed:
            return
        self.flush()
        self._closed = True

    def __enter__(self) -> Scratchpad:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if exc is not None:
            self.record("error", error=f"{type(exc).__name__}: {exc}")
        self.close()


class NullScratchpad:
    """A trace that records nothing (tracing off, sub-agent without traces, tests)."""

    path: Path | None = None

    def record(self, kind: str, **fields: Any) -> None:
        return None

    @contextmanager
    def span(self, kind: str, **fields: Any) -> Iterator[dict[str, Any]]:
        yield {}

    def flush(self) -> None:
        return None

    def close(self) -> None:
        return None

    def __enter__(self) -> NullScratchpad:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        return None


def prune_traces(traces_dir: Path, keep_days: int, today: date | None = None) -> int:
    """Delete day folders older than `keep_days`. Returns how many folders were removed. The
    scheduler's daily upkeep calls it (scheduler/app_scheduler.py, `[scheduler] trace_retention_days`)."""
    # Day folders are named by local date (Scratchpad), so "today" is the local date too.
    today = today or datetime.now().astimezone().date()
    cutoff = today - timedelta(days=keep_days)
    removed = 0
    if not Path(traces_dir).is_dir():
        return 0
    for child in Path(traces_dir).iterdir():
        try:
            day = date.fromisoformat(child.name)
        except ValueError:
            continue
        if day < cutoff and child.is_dir() and not child.is_symlink():
            shutil.rmtree(child, ignore_errors=True)
            removed += 1
    return removed
