"""The OS sandbox exec_command runs in: bubblewrap (`bwrap`), with resource limits from `prlimit`.

What the command sees:
- the system read-only (/usr, the /bin-/lib links, a short list of /etc files, extra read-only
  paths the user configured), its own /proc (new pid namespace: the bot's processes, and their
  /proc/<pid>/environ, are not there), a minimal /dev and a private /tmp;
- the workspace, read-write — the only place it can change anything that outlives it;
- not TAPEBOT_HOME: the config, the database and its WAL, .env, traces, archives are not mounted
  (and hidden under an empty tmpfs should they lie below a mounted path); protected files inside
  the workspace are covered by /dev/null;
- an environment built from the allowlist only (HOME = the workspace, TMPDIR = /tmp);
- no network (own network namespace) unless `[tools] exec_network = true`;
- CPU seconds, file size and address space limited; no core dumps.

Where no sandbox can be had (no bwrap, or user namespaces disabled) the command is refused unless
the user opted in with `[tools] unsandboxed_exec = true`; then it runs as before (allowlisted
environment, limits, output cap) but can do anything the user can.
"""

from __future__ import annotations

import glob
import math
import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:
    from agent.tools.workspace import LocalToolPolicy

SANDBOX_PATH = "/usr/local/bin:/usr/local/sbin:/usr/bin:/usr/sbin:/bin:/sbin"
# Top-level system folders: bound read-only as they are (a symlink such as /bin -> usr/bin is
# recreated as the same symlink).
_SYSTEM = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
# /etc holds secrets on some machines (shadow, ssh keys, credentials of other services): only what
# ordinary commands need is bound.
_ETC = (
    "/etc/alternatives",
    "/etc/ca-certificates",
    "/etc/ssl",
    "/etc/pki",
    "/etc/ld.so.cache",
    "/etc/ld.so.conf",
    "/etc/ld.so.conf.d",
    "/etc/localtime",
    "/etc/timezone",
    "/etc/passwd",
    "/etc/group",
    "/etc/nsswitch.conf",
    "/etc/hosts",
    "/etc/host.conf",
    "/etc/gai.conf",
    "/etc/protocols",
    "/etc/services",
    "/etc/mime.types",
    "/etc/magic",
    "/etc/os-release",
    "/etc/debian_version",
    "/etc/python3",
    "/etc/python3.11",
    "/etc/fonts",
)
_PROBE_TIMEOUT = 10.0
_probe_cache: dict[tuple[str, bool], str | None] = {}


@dataclass(frozen=True, slots=True)
class SandboxStatus:
    sandboxed: bool
    allowed: bool  # False: exec_command is refused (no sandbox and no opt-in)
    reason: str = ""  # why there is no sandbox
    installed: bool = False  # bwrap is there: the fault is the machine's (namespaces, mounts)


def bwrap_path(policy: LocalToolPolicy) -> str | None:
    name = policy.bwrap
    if not name:
        return None
    return shutil.which(name) if os.sep not in name else (name if os.access(name, os.X_OK) else None)


def _probe(bwrap: str, network: bool) -> str | None:
    """None when a minimal sandbox with the same namespaces starts here, else why not. Cached per
    process: bwrap can be installed and still unusable (user namespaces disabled by the kernel or
    by AppArmor)."""
    key = (bwrap, network)
    if key in _probe_cache:
        return _probe_cache[key]
    argv = [bwrap, "--unshare-all", *(["--share-net"] if network else []), "--die-with-parent"]
    argv += [*_system_binds(), "--proc", "/proc", "--dev", "/dev", "--", "/bin/sh", "-c", "exit 0"]
    try:
        done = subprocess.run(argv, capture_output=True, timeout=_PROBE_TIMEOUT, env={"PATH": SANDBOX_PATH})
        reason = None if done.returncode == 0 else (done.stderr.decode(errors="replace").strip() or "failed")
    except (OSError, subprocess.TimeoutExpired) as exc:
        reason = str(exc)
    _probe_cache[key] = reason
    return reason


def status(policy: LocalToolPolicy) -> SandboxStatus:
    bwrap = bwrap_path(policy)
    if bwrap is None:
        reason = "bubblewrap (`bwrap`) is not installed"
    else:
        probe = _probe(bwrap, policy.exec_network)
        if probe is None:
            return SandboxStatus(True, True)
        reason = f"bubblewrap is installed but cannot create a sandbox here: {probe.splitlines()[0][:200]}"
        return SandboxStatus(False, policy.unsandboxed_exec, reason, installed=True)
    return SandboxStatus(False, policy.unsandboxed_exec, reason)


# What container engines leave behind: podman's /run/.containerenv, Docker's /.dockerenv, and the
# `container` variable podman, systemd-nspawn and LXC set for process 1.
_CONTAINER_MARKERS = ("run/.containerenv", ".dockerenv")


def in_container(root: Path = Path("/"), environ: dict[str, str] | None = None) -> bool:
    """Whether this process runs in a container: there, a sandbox that cannot start is a matter of
    the container's run flags, not of the machine."""
    env = os.environ if environ is None else environ
    return bool(env.get("container")) or any((root / m).exists() for m in _CONTAINER_MARKERS)


def refusal(st: SandboxStatus) -> str:
    fix = (
        "See `tapebot doctor` for how to let it start here"
        if st.installed
        else "Install bubblewrap (Debian/Ubuntu: `apt install bubblewrap`)"
    )
    return (
        f"exec_command is disabled: no sandbox is available on this machine — {st.reason}. "
        f"{fix}, or, to run commands without "
        "a sandbox (they can then read and change everything your user can), set "
        "[tools] unsandboxed_exec = true in config.toml."
    )


def mode(policy: LocalToolPolicy) -> Literal["sandboxed", "sandboxed_net", "unsandboxed", "refused"]:
    """How exec_command will run under this policy (the approval card says it)."""
    st = status(policy)
    if st.sandboxed:
        return "sandboxed_net" if policy.exec_network else "sandboxed"
    return "unsandboxed" if st.allowed else "refused"


_DESCRIPTIONS = {
    "sandboxed": "runs in a sandbox: only the workspace is writable, no network, no access to tapebot's files",
    "sandboxed_net": "runs in a sandbox: only the workspace is writable, network allowed, "
    "no access to tapebot's files",
    "unsandboxed": "⚠ runs WITHOUT a sandbox (unsandboxed_exec = true): it can do anything your user can",
    "refused": "no sandbox is available on this machine, so this command will be refused",
}


def describe(policy: LocalToolPolicy) -> str:
    """One line (English) for an approval prompt: what the command will be allowed to do."""
    return _DESCRIPTIONS[mode(policy)]


def _system_binds() -> list[str]:
    out: list[str] = []
    for path in _SYSTEM:
        if os.path.islink(path):
            out += ["--symlink", os.readlink(path), path]
        elif os.path.isdir(path):
            out += ["--ro-bind", path, path]
    return out


def _under(path: Path, roots: list[Path]) -> bool:
    return any(path == r or path.is_relative_to(r) for r in roots)


def _protected_inside(policy: LocalToolPolicy, workspace: Path) -> list[Path]:
    """Existing protected files (and folders) that lie inside the workspace."""
    found: list[Path] = []
    for entry in policy.protected:
        for match in glob.glob(str(entry)) if any(c in entry.name for c in "*?[") else [str(entry)]:
            real = Path(os.path.realpath(match))
            if os.path.lexists(real) and _under(real, [workspace]):
                found.append(real)
    return sorted(set(found))


def protected_inside(policy: LocalToolPolicy) -> frozenset[str]:
    """The real paths of protected files (and folders) inside the workspace."""
    return frozenset(str(p) for p in _protected_inside(policy, Path(os.path.realpath(policy.workspace))))


def child_path(env_path: str | None, visible: list[Path]) -> str:
    """PATH for the command: the caller's entries that exist inside the sandbox, else a default."""
    keep = [p for p in (env_path or "").split(os.pathsep) if p and _under(Path(p), visible)]
    return os.pathsep.join(dict.fromkeys(keep)) or SANDBOX_PATH


# Every namespace but the user namespace: for a command that drops to an unprivileged uid inside,
# bubblewrap (root) must not map root alone into a new user namespace, where no other uid exists.
_UNSHARE_BUT_USER = ["--unshare-ipc", "--unshare-pid", "--unshare-uts", "--unshare-cgroup-try"]


def bwrap_argv(
    policy: LocalToolPolicy,
    command: str,
    *,
    network: bool,
    bwrap: str = "bwrap",
    drop: list[str] | None = None,
) -> list[str]:
    """The bwrap command line; `drop` (exec_limits.drop_argv) runs the command as an
    unprivileged uid, switched to inside the finished sandbox."""
    workspace = Path(os.path.realpath(policy.workspace))
    if drop:
        argv = [bwrap, *_UNSHARE_BUT_USER, *([] if network else ["--unshare-net"])]
    else:
        argv = [bwrap, "--unshare-all", *(["--share-net"] if network else [])]
    argv += ["--die-with-parent", "--new-session"]
    argv += _system_binds()
    for etc in _ETC:
        argv += ["--ro-bind-try", etc, etc]
    if network and os.path.exists("/etc/resolv.conf"):
        argv += ["--ro-bind", "/etc/resolv.conf", "/etc/resolv.conf"]
    tmp_size = policy.exec_disk_mb * 1024 * 1024  # a tmpfs is memory: bounded like the workspace
    argv += [
        "--proc",
        "/proc",
        "--dev",
        "/dev",
        "--size",
        str(tmp_size),
        "--perms",
        "1777",
        "--tmpfs",
        "/tmp",
    ]
    extra = [Path(os.path.realpath(p)) for p in policy.exec_read_only_paths]
    for ro in extra:
        argv += ["--ro-bind-try", str(ro), str(ro)]
    # TAPEBOT_HOME (and anything else hidden) could lie below a mounted path, e.g. an extra
    # read-only path: cover it with an empty tmpfs before the workspace goes back on top.
    # An empty, read-only tmpfs also keeps the command from making files there that exist only
    # inside the sandbox (where TAPEBOT_HOME sits below /tmp or holds the workspace).
    hidden = [Path(os.path.realpath(p)) for p in policy.hidden]
    for real in hidden:
        argv += ["--tmpfs", str(real)]
    argv += ["--bind", str(workspace), str(workspace)]
    for real in hidden:
        if real != workspace:
            argv += ["--remount-ro", str(real)]
    for prot in _protected_inside(policy, workspace):
        if prot.is_dir():
            argv += ["--tmpfs", str(prot), "--remount-ro", str(prot)]
        else:
            argv += ["--ro-bind", "/dev/null", str(prot)]
    argv += ["--remount-ro", "/", "--chdir", str(workspace), "--", *(drop or []), "/bin/sh", "-c", command]
    return argv


_drop_cache: dict[str | None, bool] = {}


def unprivileged_works(policy: LocalToolPolicy) -> bool:
    """Whether a command can run here as exec_limits.UNPRIVILEGED_UID: tapebot is root, setpriv
    exists and (sandboxed) bubblewrap starts a sandbox without a user namespace. Probed once."""
    from agent.tools import exec_limits

    drop = exec_limits.drop_argv()
    if os.getuid() != 0 or not drop:
        return False
    bwrap = bwrap_path(policy) if status(policy).sandboxed else None
    if bwrap in _drop_cache:
        return _drop_cache[bwrap]
    run = [*drop, "/bin/sh", "-c", "exit 0"]
    if bwrap is not None:
        run = [bwrap, *_UNSHARE_BUT_USER, "--unshare-net", "--die-with-parent", *_system_binds()]
        run += ["--proc", "/proc", "--dev", "/dev", "--", *drop, "/bin/sh", "-c", "exit 0"]
    try:
        done = subprocess.run(run, capture_output=True, timeout=_PROBE_TIMEOUT, env={"PATH": SANDBOX_PATH})
        works = done.returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        works = False
    _drop_cache[bwrap] = works
    return works


def limit_argv(policy: LocalToolPolicy, wall_seconds: float, *, nproc: int | None = None) -> list[str]:
    """`prlimit` in front of the command (not preexec_fn, which can deadlock a threaded parent);
    `nproc` where the process limit is RLIMIT_NPROC rather than a cgroup (exec_limits)."""
    prlimit = shutil.which("prlimit")
    if prlimit is None:
        return []
    cpu = math.ceil(wall_seconds) + 1
    size = policy.exec_file_size_mb * 1024 * 1024
    mem = policy.exec_memory_mb * 1024 * 1024
    extra = [f"--nproc={nproc}"] if nproc is not None else []
    return [prlimit, f"--cpu={cpu}", f"--fsize={size}", f"--as={mem}", *extra, "--core=0", "--"]


def limits_summary(policy: LocalToolPolicy) -> dict[str, str]:
    """The limits a command runs under, for the approval card (values, in no language)."""
    from agent.tools import exec_limits

    if exec_limits.cgroup_available():
        procs = str(policy.exec_max_processes)
    elif os.getuid() != 0:
        procs = f"{policy.exec_max_processes}+"
    elif unprivileged_works(policy):
        procs = str(policy.exec_max_processes)
    else:
        procs = "∞"  # root without a pids cgroup or a way to drop to a user the limit holds
    return {
        "processes": procs,
        "disk_mb": f"{policy.exec_disk_mb:,}",
        "memory_mb": f"{policy.exec_memory_mb:,}",
    }


def sandbox_env(policy: LocalToolPolicy, env: dict[str, str]) -> dict[str, str]:
    workspace = str(Path(os.path.realpath(policy.workspace)))
    visible = [Path(p) for p in _SYSTEM] + [Path(os.path.realpath(p)) for p in policy.exec_read_only_paths]
    out = dict(env)
    out["PATH"] = child_path(env.get("PATH"), [*visible, Path(workspace)])
    out["HOME"] = workspace
    if "TMPDIR" in out:
        out["TMPDIR"] = "/tmp"
    return out
