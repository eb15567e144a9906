"""One doctor check's result, and how a list of them is shown and turned into an exit status."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

Status = Literal["ok", "warn", "fail"]
MARK = {"ok": "✓", "warn": "!", "fail": "✗"}


@dataclass(frozen=True, slots=True)
class Check:
    name: str
    status: Status
    detail: str
    fix: str = ""


def render(checks: Sequence[Check]) -> str:
    lines = []
    for c in checks:
        lines.append(f"{MARK[c.status]} {c.name}: {c.detail}")
        if c.fix and c.status != "ok":
            lines.append(f"    fix: {c.fix}")
    failed = sum(c.status == "fail" for c in checks)
    warned = sum(c.status == "warn" for c in checks)
    lines.append(
        f"{len(checks)} checks: {len(checks) - failed - warned} ok, {warned} to look at, {failed} failed"
    )
    return "\n".join(lines)


def exit_code(checks: Sequence[Check]) -> int:
    return 1 if any(c.status == "fail" for c in checks) else 0
