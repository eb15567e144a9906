"""The local tools' policy and path confinement.

Every path a model hands to a file tool is resolved inside one root (the workspace, or the
spilled-results folder for read-back) component by component: no `..`, no `~`, no absolute path
outside the root, no symlink — anywhere in the path, dangling or not — that resolves outside it,
and never the protected files (config, database, .env) even when they sit inside the root.
"""

from __future__ import annotations

import fnmatch
import os
import stat
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING, Any

from agent.errors import InvalidToolArguments, ToolDenied
from agent.redact import Redactor

if TYPE_CHECKING:  # httpx is imported by the web tool when it runs, not with the policy
    import httpx

# Names that are never readable or writable wherever they appear (defence in depth: the app also
# lists the real files under TAPEBOT_HOME in `protected`).
DEFAULT_PROTECTED_NAMES = [".env", ".env.*", "tapebot.db", "tapebot.db-*", "config.toml"]

# Environment variables a child process may inherit (fnmatch patterns). Secrets never qualify:
# names containing KEY/TOKEN/SECRET/PASSWORD/... are dropped even if listed here.
DEFAULT_ENV_ALLOWLIST = [
    "PATH",
    "HOME",
    "USER",
    "LOGNAME",
    "SHELL",
    "LANG",
    "LANGUAGE",
    "LC_*",
    "TZ",
    "TERM",
    "TMPDIR",
    "PYTHONIOENCODING",
]

RESULTS_PREFIX = "results"

Resolver = Callable[[str, int], Awaitable[list[str]]]


@dataclass
class LocalToolPolicy:
    """What the built-in local tools may touch. Built by the composition root from Settings and put
    in `Deps`; tools read it with `ctx.deps.get(LocalToolPolicy)`."""

    workspace: Path
    results_dir: Path | None = None
    # Absolute paths (the last component may be a glob, e.g. HOME/tapebot.db*) never readable or
    # writable, even inside the workspace. A directory entry protects everything under it.
    protected: list[Path] = field(default_factory=list)
    protected_names: list[str] = field(default_factory=lambda: list(DEFAULT_PROTECTED_NAMES))
    # One read_file window. Kept under the executor's 8,000-character spill threshold: a bigger
    # window reading back a spilled result would itself be spilled again.
    read_max_chars: int = 7_500
    web_max_chars: int = 100_000
    write_max_bytes: int = 5_000_000
    exec_timeout: float = 30.0
    exec_max_timeout: float = 600.0
    exec_output_cap: int = 16_000
    # The sandbox (agent.tools.sandbox). `bwrap`: the program, by name or path (None: none).
    bwrap: str | None = "bwrap"
    unsandboxed_exec: bool = False  # run without a sandbox where none can be had
    exec_network: bool = False
    exec_memory_mb: int = 4096  # address space
    exec_file_size_mb: int = 1024  # largest file a command may write
    exec_max_processes: int = 256  # processes a command may run at once (a pids cgroup)
    exec_disk_mb: int = 512  # what a command may add to the workspace (and its /tmp's size)
    exec_read_only_paths: list[Path] = field(default_factory=list)  # extra folders it may read
    # Folders never visible to a command even if below a mounted path (TAPEBOT_HOME).
    hidden: list[Path] = field(default_factory=list)
    env_allowlist: list[str] = field(default_factory=lambda: list(DEFAULT_ENV_ALLOWLIST))
    web_max_bytes: int = 2_000_000
    web_timeout: float = 20.0
    web_max_redirects: int = 5
    allow_private_urls: bool = False
    secret_values: list[str] = field(default_factory=list)
    redactor: Redactor | None = None  # share the app's redactor; else built from secret_values
    transport: httpx.AsyncBaseTransport | None = None  # tests pass an httpx.MockTransport
    resolver: Resolver | None = None  # host → IPs; default netguard.resolve_host

    def __post_init__(self) -> None:
        self.workspace = Path(self.workspace).expanduser()
        if self.results_dir is not None:
            self.results_dir = Path(self.results_dir).expanduser()
        self.protected = [Path(p).expanduser() for p in self.protected]
        self.hidden = [Path(p).expanduser() for p in self.hidden]
        self.exec_read_only_paths = [Path(p).expanduser() for p in self.exec_read_only_paths]
        if self.redactor is None:
            self.redactor = Redactor(self.secret_values)
        elif self.secret_values:
            self.redactor.add_secrets(self.secret_values)

    @classmethod
    def for_home(cls, home: Path, **overrides: Any) -> LocalToolPolicy:
        """The standard layout under TAPEBOT_HOME: workspace/, results/, and the config, database
        and .env protected."""
        home = Path(home).expanduser()
        defaults: dict[str, Any] = {
            "workspace": home / "workspace",
            "results_dir": home / "results",
            "protected": [home / "config.toml", home / "tapebot.db*", home / ".env"],
            "hidden": [home],
        }
        defaults.update(overrides)
        return cls(**defaults)

    @property
    def redact(self) -> Redactor:
        assert self.redactor is not None
        return self.redactor

    # -- protection -----------------------------------------------------------------------------
    def is_protected(self, path: Path) -> bool:
        """`path` must already be resolved."""
        name = path.name
        if any(fnmatch.fnmatch(name, pat) for pat in self.protected_names):
            return True
        for entry in self.protected:
            real_parent = _real(entry.parent)
            candidate = real_parent / entry.name
            if any(ch in entry.name for ch in "*?["):
                if path.parent == real_parent and fnmatch.fnmatch(name, entry.name):
                    return True
                continue
            real = _real(candidate)
            if path == real or path.is_relative_to(real):
                return True
        return False


def _real(p: Path) -> Path:
    try:
        return p.resolve(strict=False)
    except (OSError, RuntimeError):
        return p.absolute()


# -- path resolution ------------------------------------------------------------------------------
def _split_user_path(raw: str) -> tuple[bool, list[str]]:
    """(is_absolute, parts) of a model-supplied path, refusing the obviously bad forms."""
    if not isinstance(raw, str) or not raw.strip():
        raise InvalidToolArguments("path is empty")
    if "\x00" in raw:
        raise InvalidToolArguments("path contains a NUL byte")
    raw = raw.strip()
    if raw.startswith("~"):
        raise ToolDenied(f"'{raw}': home-relative paths are not allowed; use a path inside the workspace")
    pure = PurePosixPath(raw)
    parts = [p for p in pure.parts if p not in ("/", ".")]
    if ".." in parts:
        raise ToolDenied(f"'{raw}': '..' is not allowed; use a path inside the workspace")
    return pure.is_absolute(), parts


def _confine(root: Path, parts: list[str], raw: str) -> Path:
    """Walk `parts` under `root`, following symlinks one component at a time and refusing any that
    leads outside. Returns the real path (components that do not exist yet are appended as-is)."""
    current = root
    for i, part in enumerate(parts):
        nxt = current / part
        try:
            st = os.lstat(nxt)
        except FileNotFoundError:
            # The rest does not exist yet (write_file creating dirs); nothing left to follow.
            return current.joinpath(*parts[i:])
        except OSError as exc:
            raise ToolDenied(f"'{raw}': cannot inspect path: {exc.strerror}") from None
        if stat.S_ISLNK(st.st_mode):
            target = _real(nxt)
            if not (target == root or target.is_relative_to(root)):
                raise ToolDenied(f"'{raw}': a symlink in this path points outside the workspace")
            nxt = target
        current = nxt
    return current


@dataclass(frozen=True, slots=True)
class ResolvedPath:
    path: Path  # the real, confined path
    root: Path  # the real root it is confined to
    display: str  # how to show it to the model (relative to its root, results/ prefixed)
    in_results: bool = False


def resolve_path(policy: LocalToolPolicy, raw: str, *, for_write: bool = False) -> ResolvedPath:
    """Resolve a model-supplied path inside the workspace (or, for reads, the results folder).

    Raises ToolDenied for escapes and protected files, InvalidToolArguments for malformed input."""
    is_abs, parts = _split_user_path(raw)
    ws_root = _real(policy.workspace)
    res_root = _real(policy.results_dir) if policy.results_dir is not None else None

    candidates: list[tuple[Path, list[str], bool]] = []
    if is_abs:
        absolute = Path("/", *parts)
        roots = [(ws_root, policy.workspace, False)]
        if res_root is not None and policy.results_dir is not None and not for_write:
            roots.append((res_root, policy.results_dir, True))
        for root, configured, in_results in roots:
            # Accept the root as configured or as resolved (/tmp vs /private/tmp on macOS).
            base = next((b for b in (root, configured.absolute()) if absolute.is_relative_to(b)), None)
            if base is not None:
                candidates.append((root, list(absolute.relative_to(base).parts), in_results))
                break
        if not candidates:
            where = "the workspace" if len(roots) == 1 else "the workspace or results folder"
            raise ToolDenied(f"'{raw}': absolute paths outside {where} are not allowed")
    else:
        if res_root is not None and not for_write and len(parts) >= 2 and parts[0] == RESULTS_PREFIX:
            # Spilled tool results are referenced as results/<file>; prefer the results folder,
            # fall back to a workspace folder of the same name.
            in_res = _confine(res_root, parts[1:], raw)
            if in_res.exists() or not (ws_root / RESULTS_PREFIX).is_dir():
                candidates.append((res_root, parts[1:], True))
        candidates.append((ws_root, parts, False))

    root, rel, in_results = candidates[0]
    real = _confine(root, rel, raw)
    if not (real == root or real.is_relative_to(root)):  # belt and braces
        raise ToolDenied(f"'{raw}': resolves outside the workspace")
    if policy.is_protected(real):
        raise ToolDenied(f"'{raw}': this file is protected (configuration, database or secrets)")
    rel_display = real.relative_to(root).as_posix()
    display = f"{RESULTS_PREFIX}/{rel_display}" if in_results else rel_display
    return ResolvedPath(real, root, display, in_results)
