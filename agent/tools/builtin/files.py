"""read_file / write_file implementations, confined by agent.tools.workspace.

Files are opened by their resolved real path with O_NOFOLLOW, so a final component swapped for a
symlink after the check is refused by the kernel rather than followed.
"""

from __future__ import annotations

import contextlib
import errno
import io
import os
import stat
import tempfile

from agent.errors import InvalidToolArguments, ToolDenied, ToolFailed
from agent.tools.workspace import LocalToolPolicy, ResolvedPath, resolve_path

_O_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_O_NONBLOCK = getattr(os, "O_NONBLOCK", 0)
_LIST_MAX = 500
_BINARY_SNIFF = 8192


def _open_regular(rp: ResolvedPath, raw: str) -> int:
    try:
        # O_NONBLOCK so opening a FIFO cannot hang; we refuse non-regular files right after.
        fd = os.open(rp.path, os.O_RDONLY | _O_NOFOLLOW | _O_NONBLOCK)
    except FileNotFoundError:
        raise ToolFailed(f"'{raw}' does not exist") from None
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise ToolDenied(f"'{raw}' is a symlink that changed while being opened") from None
        raise ToolFailed(f"cannot open '{raw}': {exc.strerror}") from None
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode):
        os.close(fd)
        raise ToolFailed(f"'{raw}' is not a regular file")
    if _O_NONBLOCK:
        os.set_blocking(fd, True)
    return fd


def _list_dir(policy: LocalToolPolicy, rp: ResolvedPath) -> str:
    entries = []
    try:
        with os.scandir(rp.path) as it:
            for entry in it:
                if policy.is_protected(rp.path / entry.name):
                    continue
                suffix = "/" if entry.is_dir(follow_symlinks=False) else ("@" if entry.is_symlink() else "")
                entries.append(entry.name + suffix)
    except OSError as exc:
        raise ToolFailed(f"cannot list '{rp.display}': {exc.strerror}") from None
    entries.sort()
    shown = entries[:_LIST_MAX]
    more = f"\n[… {len(entries) - _LIST_MAX} more entries]" if len(entries) > _LIST_MAX else ""
    body = "\n".join(shown) if shown else "(empty)"
    return f"Directory {rp.display}/ ({len(entries)} entries):\n{body}{more}"


def read_file_impl(policy: LocalToolPolicy, path: str, offset: int, limit: int) -> str:
    if offset < 0:
        raise InvalidToolArguments("offset must be 0 or more")
    if limit < 1:
        raise InvalidToolArguments("limit must be at least 1")
    limit = min(limit, policy.read_max_chars)
    rp = resolve_path(policy, path)
    if rp.path.is_dir():
        return policy.redact.text(_list_dir(policy, rp))
    fd = _open_regular(rp, path)
    size = os.fstat(fd).st_size
    with os.fdopen(fd, "rb") as fb:
        head = fb.read(_BINARY_SNIFF)
        if b"\x00" in head:
            return f"'{rp.display}' is a binary file ({size} bytes); its content is not shown."
        fb.seek(0)
        # Offsets count characters (what the model sees), read incrementally so a large file is
        # never decoded past the requested window.
        ft = io.TextIOWrapper(fb, encoding="utf-8", errors="replace", newline="")
        skipped = 0
        while skipped < offset:
            chunk = ft.read(min(1 << 20, offset - skipped))
            if not chunk:
                break
            skipped += len(chunk)
        text = ft.read(limit)
        more = bool(ft.read(1))
        ft.detach()
    if skipped < offset:
        return f"'{rp.display}' has only {skipped} characters; offset {offset} is past the end."
    end = offset + len(text)
    body = policy.redact.text(text)
    if more:
        body += (
            f"\n[… truncated: showed characters {offset}–{end} of '{rp.display}' ({size} bytes); "
            f"call read_file with offset={end} to continue]"
        )
    elif offset:
        body += f"\n[end of '{rp.display}': characters {offset}–{end}]"
    return body


def write_file_impl(policy: LocalToolPolicy, path: str, content: str) -> str:
    data = content.encode("utf-8")
    if len(data) > policy.write_max_bytes:
        raise InvalidToolArguments(f"content is {len(data)} bytes; the limit is {policy.write_max_bytes}")
    policy.workspace.mkdir(parents=True, exist_ok=True)
    rp = resolve_path(policy, path, for_write=True)
    if rp.path == rp.root:
        raise InvalidToolArguments("path names the workspace itself, not a file")
    if rp.path.is_dir():
        raise ToolFailed(f"'{path}' is a directory")
    parent = rp.path.parent
    try:
        parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ToolFailed(f"cannot create folder for '{path}': {exc.strerror}") from None
    # Re-check after mkdir: a component created concurrently as a symlink must not be written
    # through.
    again = resolve_path(policy, path, for_write=True)
    if again.path != rp.path:
        raise ToolDenied(f"'{path}' changed while being written")
    existed = rp.path.exists()
    # Write a temp file next to the target and rename it into place: the target is never left
    # half-written, and rename replaces a symlink rather than writing through it.
    fd, tmp = tempfile.mkstemp(prefix=".tapebot-", suffix=".tmp", dir=parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
        if existed:
            with contextlib.suppress(OSError):
                os.chmod(tmp, stat.S_IMODE(os.stat(rp.path, follow_symlinks=False).st_mode))
        else:
            os.chmod(tmp, 0o644)
        os.replace(tmp, rp.path)
    except OSError as exc:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise ToolFailed(f"cannot write '{path}': {exc.strerror}") from None
    verb = "overwrote" if existed else "created"
    return f"{verb} {rp.display} ({len(data)} bytes)"
