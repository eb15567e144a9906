"""TAPEBOT_HOME is private: the folder 0700, its files 0600, whatever the umask.

Explicit modes where we create the known files (the home and its folders, config.toml, the SQLite
database — SQLite then gives its -wal/-shm the database's mode), and a private process umask while
the bot runs for everything else it writes (traces, archives, spilled results, charts, logs).
Existing looser modes are not changed behind the user's back: they are reported, with the fix.
"""

from __future__ import annotations

import contextlib
import os
import stat
from dataclasses import dataclass
from pathlib import Path

PRIVATE_DIR = 0o700
PRIVATE_FILE = 0o600
PRIVATE_UMASK = 0o077
# What `config check` and the start-up look at (the workspace is the commands' own place).
_FILES = ("config.toml", ".env", "tapebot.db", "tapebot.db-wal", "tapebot.db-shm", "tapebot.db-journal")
_DIRS = ("traces", "results", "archive", "skills", "logs", "data")


def private_umask() -> int:
    """Set the process umask to 077; returns the previous one (to give back)."""
    return os.umask(PRIVATE_UMASK)


def make_private_dir(path: Path) -> None:
    """mkdir -p with 0700 for every folder it creates (mkdir's mode is filtered by the umask, which
    can only take bits away, so 0700 holds even under umask 000)."""
    path = Path(path)
    missing = []
    for p in (path, *path.parents):
        if p.exists():
            break
        missing.append(p)
    for p in reversed(missing):
        with contextlib.suppress(FileExistsError):
            p.mkdir(mode=PRIVATE_DIR)


def create_private_file(path: Path) -> None:
    """Create `path` empty with mode 0600 if it does not exist (never changes an existing file)."""
    with contextlib.suppress(FileExistsError):
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, PRIVATE_FILE))


def write_private_text(path: Path, text: str) -> None:
    """Write `path` atomically as a 0600 file (a temp file beside it, then rename)."""
    tmp = path.with_name(f".{path.name}.tmp")
    with contextlib.suppress(FileNotFoundError):
        tmp.unlink()
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, PRIVATE_FILE)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
        os.chmod(tmp, PRIVATE_FILE)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise


@dataclass(frozen=True, slots=True)
class LooseMode:
    path: Path
    mode: int
    is_dir: bool

    def __str__(self) -> str:
        kind = "folder" if self.is_dir else "file"
        want = "700" if self.is_dir else "600"
        return (
            f"{self.path} is a {kind} open to other users (mode {self.mode:04o}, "
            f"{stat.filemode(self.mode | (stat.S_IFDIR if self.is_dir else stat.S_IFREG))}) — "
            f"fix: chmod {want} {self.path}"
        )


def loose_modes(home: Path) -> list[LooseMode]:
    """TAPEBOT_HOME itself, its secret files and its data folders wherever group or others have
    any access."""
    home = Path(home)
    found: list[LooseMode] = []
    candidates = [(home, True)] + [(home / n, False) for n in _FILES] + [(home / n, True) for n in _DIRS]
    for path, is_dir in candidates:
        try:
            st = path.lstat()
        except OSError:
            continue
        if stat.S_ISLNK(st.st_mode):
            continue
        mode = stat.S_IMODE(st.st_mode)
        if mode & 0o077:
            found.append(LooseMode(path, mode, is_dir))
    return found
