"""exec_command implementation.

The child runs in the OS sandbox of agent.tools.sandbox (bubblewrap: only the workspace writable,
TAPEBOT_HOME invisible, own /proc, no network unless configured, CPU/size/memory limits), in its
own session (process group), with an environment built only from an allowlist — provider keys,
bot tokens and passwords are never inherited. Where no sandbox can be had the command is refused
unless `unsandboxed_exec` is set. Output (stdout+stderr interleaved) is capped, keeping the head
and the tail, and redacted. On timeout or cancellation the whole process group is killed (the
sandbox dies with it), so `sh -c "sleep 100 & ..."` leaves nothing behind.
"""

from __future__ import annotations

import asyncio
import contextlib
import fnmatch
import os
import re
import signal
from collections.abc import Mapping

from agent.errors import InvalidToolArguments, ToolDenied, ToolFailed, ToolTimedOut
from agent.tools import exec_limits, sandbox
from agent.tools.workspace import LocalToolPolicy

# Dropped even when allowlisted (leviath-core: a denylist alone misses AWS_SECRET_ACCESS_KEY etc.,
# so this is a second filter behind the allowlist, not the main one).
SECRET_NAME = re.compile(r"KEY|TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIAL|COOKIE|AUTH", re.IGNORECASE)
_READ_CHUNK = 65536
_EXIT_GRACE = 0.3  # after the shell exits, how long background children may keep the pipe open
_DISK_CHECK_EVERY = 0.5  # seconds between the write-budget watchdog's looks at the workspace


def build_child_env(policy: LocalToolPolicy, source: Mapping[str, str] | None = None) -> dict[str, str]:
    """The child's environment: allowlisted names only, minus secret-looking names and any value
    that contains a configured secret or a token shape."""
    source = os.environ if source is None else source
    redact = policy.redact
    env: dict[str, str] = {}
    for name, value in source.items():
        if not any(fnmatch.fnmatchcase(name, pat) for pat in policy.env_allowlist):
            continue
        if SECRET_NAME.search(name):
            continue
        if redact.text(value) != value:
            continue
        env[name] = value
    env.setdefault("PATH", os.defpath)
    return env


class CappedOutput:
    """Keeps the first ~2/3 and the last ~1/3 of `cap` bytes; counts what it dropped."""

    def __init__(self, cap: int):
        self.cap = max(cap, 64)
        self.head_cap = self.cap * 2 // 3
        self.tail_cap = self.cap - self.head_cap
        self.head = bytearray()
        self.tail = bytearray()
        self.total = 0

    def feed(self, chunk: bytes) -> None:
        self.total += len(chunk)
        if len(self.head) < self.head_cap:
            take = self.head_cap - len(self.head)
            self.head += chunk[:take]
            chunk = chunk[take:]
        if chunk:
            self.tail += chunk
            if len(self.tail) > self.tail_cap:
                del self.tail[: len(self.tail) - self.tail_cap]

    @property
    def truncated(self) -> bool:
        return self.total > len(self.head) + len(self.tail)

    def text(self) -> str:
        head = self.head.decode("utf-8", errors="replace")
        if not self.truncated:
            return head + self.tail.decode("utf-8", errors="replace")
        omitted = self.total - len(self.head) - len(self.tail)
        tail = self.tail.decode("utf-8", errors="replace")
        return f"{head}\n[… output truncated: {omitted} bytes omitted of {self.total} …]\n{tail}"


def _kill_group(proc: asyncio.subprocess.Process) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError, OSError):
        os.killpg(proc.pid, signal.SIGKILL)


async def exec_command_impl(policy: LocalToolPolicy, command: str, timeout: float | None) -> str:
    if not command or not command.strip():
        raise InvalidToolArguments("command is empty")
    limit = policy.exec_timeout if timeout is None else float(timeout)
    if limit <= 0:
        raise InvalidToolArguments("timeout must be greater than 0 seconds")
    limit = min(limit, policy.exec_max_timeout)
    st = await asyncio.to_thread(sandbox.status, policy)  # probes bwrap once per process
    if not st.allowed:
        raise ToolDenied(sandbox.refusal(st))
    policy.workspace.mkdir(parents=True, exist_ok=True)
    env = build_child_env(policy)
    cgroup = await asyncio.to_thread(exec_limits.PidsCgroup.create, policy.exec_max_processes)
    drop: list[str] = []
    if cgroup is None and os.getuid() == 0 and await asyncio.to_thread(sandbox.unprivileged_works, policy):
        # RLIMIT_NPROC does not hold root: the command runs as a user it holds
        drop = exec_limits.drop_argv()
        keep = sandbox.protected_inside(policy)
        await asyncio.to_thread(exec_limits.hand_over, policy.workspace, keep=keep)
    run_as = exec_limits.UNPRIVILEGED_UID if drop else None
    nproc = None if cgroup else exec_limits.nproc_limit(policy.exec_max_processes, run_as)
    limits = sandbox.limit_argv(policy, limit, nproc=nproc)
    if st.sandboxed:
        bwrap = sandbox.bwrap_path(policy) or "bwrap"
        argv = limits + sandbox.bwrap_argv(
            policy, command, network=policy.exec_network, bwrap=bwrap, drop=drop
        )
        env = sandbox.sandbox_env(policy, env)
    else:
        argv = [*limits, *drop, "/bin/sh", "-c", command]
    if cgroup is not None:
        argv = cgroup.wrap(argv)
    disk = exec_limits.DiskBudget(policy.workspace, policy.exec_disk_mb * 1024 * 1024)
    await asyncio.to_thread(disk.start)
    try:
        return await _run(policy, command, argv, env, limit, disk)
    finally:
        if cgroup is not None:
            await asyncio.to_thread(cgroup.close)


async def _run(
    policy: LocalToolPolicy,
    command: str,
    argv: list[str],
    env: dict[str, str],
    limit: float,
    disk: exec_limits.DiskBudget,
) -> str:
    redact = policy.redact
    try:
        proc = await asyncio.create_subprocess_exec(
            *argv,
            cwd=str(policy.workspace),
            env=env,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT,
            start_new_session=True,  # own process group, so a timeout can kill all of it
        )
    except OSError as exc:
        raise ToolFailed(f"could not start the command: {exc.strerror or exc}") from None

    out = CappedOutput(policy.exec_output_cap)

    async def pump() -> None:
        assert proc.stdout is not None
        while chunk := await proc.stdout.read(_READ_CHUNK):
            out.feed(chunk)

    loop = asyncio.get_running_loop()
    reader = asyncio.create_task(pump())
    deadline = loop.time() + limit
    exited_at: float | None = None
    timed_out = False
    next_disk_check = loop.time() + _DISK_CHECK_EVERY
    try:
        # Wait for EOF on the pipe; if the shell itself has exited but a background child still
        # holds the pipe, stop after a short grace instead of waiting for the timeout.
        while not reader.done():
            now = loop.time()
            if now >= deadline:
                timed_out = True
                break
            if now >= next_disk_check:
                if await asyncio.to_thread(disk.over):
                    break  # over its write budget: stopped now, cleaned up below
                next_disk_check = loop.time() + _DISK_CHECK_EVERY
            if proc.returncode is not None:
                exited_at = exited_at or now
                if now - exited_at >= _EXIT_GRACE:
                    break
            await asyncio.wait({reader}, timeout=min(0.05, deadline - now))
    finally:
        # Timeout, cancellation, or background children left behind: the group goes. (After a
        # clean exit the group is usually gone already and this is a no-op.)
        _kill_group(proc)
        with contextlib.suppress(TimeoutError, asyncio.CancelledError):
            await asyncio.wait_for(asyncio.shield(reader), 2.0)
        if not reader.done():
            reader.cancel()
        with contextlib.suppress(TimeoutError, asyncio.CancelledError, ProcessLookupError):
            await asyncio.wait_for(proc.wait(), 2.0)

    await asyncio.to_thread(disk.enforce)
    output = redact.text(out.text())
    if disk.exceeded:
        output = f"{output}\n{disk.report()}" if output else disk.report()
    if timed_out:
        tail = output[-2000:] if output else "(no output)"
        raise ToolTimedOut(
            f"command timed out after {limit:g}s and was killed (with its child processes). "
            f"Output before the timeout:\n{tail}"
        )
    code = proc.returncode
    status = f"exit code: {code}" if code is None or code >= 0 else f"killed by signal {-code}"
    return f"$ {redact.text(command)}\n{status}\n{output if output else '(no output)'}"
