"""A probe in a fresh interpreter: what a start imports is only seen from a process of its own."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from collections.abc import Mapping, Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def probe(code: str, *args: str, env: Mapping[str, str] | None = None, path: Sequence[Path] = ()) -> dict:
    """Run `code` (with `args`) in a new interpreter at the repository root, without the
    developer's model keys, with `env` added and `path` after the root on PYTHONPATH; the JSON on
    its last line of output."""
    full_env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    full_env.update(env or {})
    full_env["PYTHONPATH"] = os.pathsep.join(str(p) for p in (ROOT, *path))
    out = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code), *args],
        cwd=ROOT,
        env=full_env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.strip().splitlines()[-1])
