"""A background task's result as a person reads it: a tool's JSON turned into short lines and, for
rows of records, a small table — never the raw JSON (`/tasks show`)."""

from __future__ import annotations

import json
from typing import Any

MAX_KEYS = 12
MAX_ROWS = 8
MAX_COLUMNS = 6
MAX_CELL = 24


def result_text(result: str, max_chars: int = 1500) -> str:
    """`result` as lines ("- key: value") and Markdown tables; text that is no JSON as it is."""
    try:
        value = json.loads(result)
    except ValueError:
        return result[:max_chars]
    lines = _lines(value)
    text = "\n".join(lines)
    return text if len(text) <= max_chars else text[: max_chars - 1] + "…"


def _lines(value: Any) -> list[str]:
    if isinstance(value, dict):
        out: list[str] = []
        for key, item in list(value.items())[:MAX_KEYS]:
            if _records(item):
                out.append(f"- {_label(key)}: {len(item)}")
                out.extend(_table(item))
            else:
                out.append(f"- {_label(key)}: {_short(item)}")
        if len(value) > MAX_KEYS:
            out.append(f"- … (+{len(value) - MAX_KEYS})")
        return out
    if _records(value):
        return _table(value)
    return [_short(value)]


def _label(key: Any) -> str:
    return str(key).replace("_", " ")


def _records(value: Any) -> bool:
    return isinstance(value, list) and bool(value) and all(isinstance(v, dict) for v in value)


def _short(value: Any, limit: int = 120) -> str:
    if isinstance(value, dict):
        text = ", ".join(
            f"{_label(k)} {_short(v, 30)}" for k, v in value.items() if not isinstance(v, dict | list)
        )
    elif isinstance(value, list):
        text = ", ".join(_short(v, 30) for v in value[:8]) + (
            f" … (+{len(value) - 8})" if len(value) > 8 else ""
        )
    elif isinstance(value, float):
        text = f"{value:,.4f}".rstrip("0").rstrip(".") if abs(value) < 1e6 else f"{value:,.0f}"
    elif value is None:
        text = "—"
    else:
        text = str(value)
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _table(rows: list[dict[str, Any]]) -> list[str]:
    columns: list[str] = []
    for row in rows[:MAX_ROWS]:
        for key, v in row.items():
            if key not in columns and not isinstance(v, dict | list) and len(columns) < MAX_COLUMNS:
                columns.append(key)
    if not columns:
        return []

    def cell(v: Any) -> str:
        return _short(v, MAX_CELL).replace("|", "/")

    out = ["", "| " + " | ".join(_label(c) for c in columns) + " |", "|" + "---|" * len(columns)]
    out += ["| " + " | ".join(cell(r.get(c)) for c in columns) + " |" for r in rows[:MAX_ROWS]]
    if len(rows) > MAX_ROWS:
        out.append(f"… (+{len(rows) - MAX_ROWS})")
    out.append("")
    return out
