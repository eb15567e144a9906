"""TaskState: a per-session summary of the work in progress.

    goal             the user's current high-level goal
    open_loops       things still unresolved across turns ("decide whether to add to 600519")
    important_facts  facts that stay true across turns ("user holds no more than 5 stocks")
    last_decision    the latest important decision and its reason

It is refreshed in the background after turns (never blocking a reply) by a small LLM call over the
recent messages, and shown to the model in the recalled context. It never stores what a tool can
read fresh — prices, balances, positions — nor step-level to-dos ("call analyze_stock next"):
those filters run on every update (`normalise_task_state`).
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
from collections.abc import Sequence
from datetime import datetime
from typing import Any

import sqlalchemy as sa
from pydantic import BaseModel, Field, ValidationError
from sqlalchemy.engine import Connection

from agent.context_hooks import unwrap_recall
from agent.messages import Message
from agent.ports import Clock, SystemClock
from agent.providers.base import ModelClient, ModelRequest, TextChunk
from memory.base import Base
from memory.db import Database
from memory.models import UTCDateTime

log = logging.getLogger(__name__)

MAX_ITEMS = 8
MAX_ITEM_CHARS = 160
RECENT_MESSAGES = 10

# NOFXi's open-loop filter (step-level to-dos and secrets), plus Chinese equivalents.
_STEP_PREFIXES = (
    "wait for", "waiting for", "ask for", "call ", "run ", "execute", "invoke", "use tool", "step",
    "调用", "执行", "运行", "等待", "下一步", "步骤",
)  # fmt: skip
_STEP_MARKERS = (
    "current step", "tool call", "api key", "api secret", "secret key", "passphrase", "model id", "exchange id",
    "工具调用", "当前步骤", "密钥",
)  # fmt: skip
# Live numbers a tool should re-read: prices, balances, positions, P&L.
_LIVE_RE = re.compile(
    r"(价格|现价|股价|收盘价|开盘价|成本价|余额|可用资金|资金余额|市值|浮盈|浮亏|盈亏|持仓\s*\d|持有\s*\d+\s*股"
    r"|\bprice\b|\bbalance\b|\bequity\b|\bp&l\b|\bpnl\b"
    r"|[¥$￥]\s*\d|\d+(?:\.\d+)?\s*(?:元|块|美元|usd|usdt|rmb|cny)\b)",
    re.I,
)

TASKSTATE_PROMPT = """You maintain a compact TaskState for an investing assistant's conversation.
Given the previous TaskState (JSON) and the latest messages, return ONLY a JSON object:
{"goal": str, "open_loops": [str], "important_facts": [str],
 "last_decision": {"action": str, "reason": str, "still_valid": bool} | null}
Rules: keep it short (≤8 items per list, each one sentence, in the conversation's language);
replace stale items; keep facts that stay true across turns (user constraints, chosen stocks,
agreed plans); NEVER store prices, balances, positions, P&L or anything a tool can re-read;
NEVER store step-level to-dos (which tool to call next); no secrets."""


class LastDecision(BaseModel):
    action: str = ""
    reason: str = ""
    still_valid: bool = True
    at: datetime | None = None


class TaskState(BaseModel):
    goal: str = ""
    open_loops: list[str] = Field(default_factory=list)
    important_facts: list[str] = Field(default_factory=list)
    last_decision: LastDecision | None = None
    updated_at: datetime | None = None
    seen_messages: int = 0  # history length at the last update

    def is_empty(self) -> bool:
        return not (self.goal or self.open_loops or self.important_facts or self.last_decision)


# A plain Core table (every query is a Core statement): an ORM mapping cost ~2 ms at import.
TASK_STATES = sa.Table(
    "task_states",
    Base.metadata,
    sa.Column("session_id", sa.String(255), primary_key=True, nullable=False),
    sa.Column("data", sa.JSON, nullable=False),
    sa.Column("updated_at", UTCDateTime, nullable=False),
)


def _is_live(text: str) -> bool:
    return bool(_LIVE_RE.search(text))


def _is_step(text: str) -> bool:
    low = text.strip().lower()
    return low.startswith(_STEP_PREFIXES) or any(m in low for m in _STEP_MARKERS)


def _clean_list(items: Sequence[Any], *, drop_steps: bool) -> list[str]:
    out: list[str] = []
    seen: set[str] = set()
    for item in items:
        text = " ".join(str(item).split())[:MAX_ITEM_CHARS]
        key = text.lower()
        if not text or key in seen or _is_live(text) or (drop_steps and _is_step(text)):
            continue
        seen.add(key)
        out.append(text)
    return out[:MAX_ITEMS]


def normalise_task_state(state: TaskState) -> TaskState:
    """De-duplicate lists (case-insensitive), drop step-level open loops, secrets and live numbers."""
    goal = "" if _is_live(state.goal) else " ".join(state.goal.split())[:MAX_ITEM_CHARS]
    decision = state.last_decision
    if decision is not None and (
        not decision.action.strip() or _is_live(decision.action + " " + decision.reason)
    ):
        decision = None
    return state.model_copy(
        update={
            "goal": goal,
            "open_loops": _clean_list(state.open_loops, drop_steps=True),
            "important_facts": _clean_list(state.important_facts, drop_steps=False),
            "last_decision": decision,
        }
    )


def render_task_state(state: TaskState | None, max_chars: int = 400) -> str:
    """Lines for the recalled context (empty when there is nothing)."""
    if state is None or state.is_empty():
        return ""
    lines = []
    if state.goal:
        lines.append(f"- 目标: {state.goal}")
    lines += [f"- 未完成: {x}" for x in state.open_loops]
    lines += [f"- 事实: {x}" for x in state.important_facts]
    if state.last_decision and state.last_decision.still_valid:
        d = state.last_decision
        lines.append(f"- 最近决定: {d.action}" + (f"（{d.reason}）" if d.reason else ""))
    out, used = [], 0
    for line in lines:
        if used + len(line) + 1 > max_chars:
            break
        out.append(line)
        used += len(line) + 1
    return "\n".join(out)


_SELECT_DATA = sa.select(TASK_STATES.c.data).where(TASK_STATES.c.session_id == sa.bindparam("session_id"))


class TaskStateStore:
    def __init__(self, db: Database, *, clock: Clock | None = None):
        self.db = db
        self.clock = clock or SystemClock()

    async def get(self, session_id: str) -> TaskState | None:
        # read on every recall: one short Core transaction, not an ORM session
        def core(c: Connection) -> Any:
            return c.execute(_SELECT_DATA, {"session_id": session_id}).scalar()

        return self.decode(await self.db.run(core))

    @staticmethod
    def decode(data: Any) -> TaskState | None:
        """The stored `data` (as SQLAlchemy reads it) as a TaskState; None if absent or unreadable."""
        if data is None:
            return None
        try:
            return TaskState.model_validate(data)
        except ValidationError:
            return None

    async def save(self, session_id: str, state: TaskState) -> None:
        data, now = state.model_dump(mode="json"), self.clock.now()

        def upsert(c: Connection) -> None:  # one Core transaction, not an ORM session
            found = c.execute(
                sa.update(TASK_STATES)
                .where(TASK_STATES.c.session_id == session_id)
                .values(data=data, updated_at=now)
            )
            if not found.rowcount:
                c.execute(sa.insert(TASK_STATES).values(session_id=session_id, data=data, updated_at=now))

        await self.db.run(upsert, write=True)

    async def delete(self, session_id: str) -> None:
        async with self.db.session() as s:
            await s.execute(sa.delete(TASK_STATES).where(TASK_STATES.c.session_id == session_id))


def _dialog(messages: Sequence[Message], limit: int = RECENT_MESSAGES) -> str:
    lines = []
    for msg in messages[-limit:]:
        if msg.meta.get("internal_retry") or msg.meta.get("compaction") == "ack":
            continue
        if msg.text:
            text = unwrap_recall(msg.text) if msg.role == "user" else msg.text
            lines.append(f"[{msg.role}] {text[:600]}")
        for call in msg.tool_calls:
            lines.append(f"[assistant:tool_call] {call.name}")
        for result in msg.tool_results:
            lines.append(f"[tool:{result.name}] {result.content[:200]}")
    return "\n".join(lines)


def _parse_json_object(text: str) -> dict[str, Any] | None:
    start, end = text.find("{"), text.rfind("}")
    if start < 0 or end <= start:
        return None
    try:
        value = json.loads(text[start : end + 1])
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


class TaskStateUpdater:
    """Refreshes a session's TaskState from its latest messages with one small LLM call."""

    def __init__(self, store: TaskStateStore, client: ModelClient | None, *, timeout: float = 60.0):
        self.store = store
        self.client = client
        self.timeout = timeout

    async def update(self, session_id: str, messages: Sequence[Message]) -> TaskState | None:
        """Returns the new state, or None when skipped or failed (the old state is kept)."""
        if self.client is None or not messages:
            return None
        previous = await self.store.get(session_id) or TaskState()
        prompt = (
            "Previous TaskState:\n"
            + previous.model_dump_json(exclude={"updated_at", "seen_messages"})
            + "\n\nLatest messages:\n"
            + _dialog(messages)
        )
        request = ModelRequest(
            messages=[Message.user(prompt)], system=TASKSTATE_PROMPT, max_tokens=600, temperature=0.1
        )
        try:
            text = await asyncio.wait_for(_collect(self.client, request), self.timeout)
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # noqa: BLE001 — any model/provider failure is logged; the task state stays as it was
            log.warning("TaskState update failed for session %s: %s", session_id, exc)
            return None
        data = _parse_json_object(text)
        if data is None:
            log.warning("TaskState update for session %s returned no JSON object", session_id)
            return None
        try:
            fresh = TaskState.model_validate(
                {
                    k: v
                    for k, v in data.items()
                    if k in ("goal", "open_loops", "important_facts", "last_decision")
                }
            )
        except ValidationError as exc:
            log.warning("TaskState update for session %s was invalid: %s", session_id, exc)
            return None
        clock_now = self.store.clock.now()
        if fresh.last_decision is not None and fresh.last_decision.at is None:
            fresh.last_decision.at = clock_now
        state = normalise_task_state(fresh).model_copy(
            update={"updated_at": clock_now, "seen_messages": len(messages)}
        )
        await self.store.save(session_id, state)
        return state


async def _collect(client: ModelClient, request: ModelRequest) -> str:
    parts: list[str] = []
    async for chunk in client.stream(request):
        if isinstance(chunk, TextChunk):
            parts.append(chunk.text)
    return "".join(parts)
