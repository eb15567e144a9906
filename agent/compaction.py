"""Recoverable context compaction (seeds 000/001).

When a conversation's estimate passes `W − reserve`, the history is split into an old *head* and a
recent *tail* (a 20K-token budget, at least 4 messages, never starting on a tool result, widened
so every tool result keeps the assistant call that issued it). The head is replaced by:

    [对话摘要]       an LLM summary (≤500 words: intent, actions done, stock conclusions)
    [动态保留片段]   anchors: the head's highest-value messages, verbatim snippets
    [可恢复归档]     archive://<session>/<id> — the original head, searchable and restorable

Before the summary, large tool results are shrunk on a *copy* of the head (the stored messages are
never rewritten) and stable preferences are flushed to long-term memory. A failed, empty or too
short summary leaves the messages unchanged (logged); only when the request would no longer fit
does the hard guard drop the oldest messages, never splitting a call from its result.

`agent` cannot import `memory`: the archive and the preference flush are ports (`ArchiveStore`,
`MemoryFlush`) that `memory/` implements.
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import orjson

from agent import events as ev
from agent.errors import CompactionFailed
from agent.messages import Message, ToolResultPart
from agent.providers.base import ModelClient, ModelInfo, ModelRequest, TextChunk
from agent.tokens import estimate_message, estimate_messages, messages_within

log = logging.getLogger(__name__)

# Seed constants (WyckoffAgent cli/compaction.py).
COMPACT_RESERVE_RATIO = 0.25
MIN_COMPACT_RESERVE_TOKENS = 16_384
MAX_COMPACT_RESERVE_TOKENS = 32_768
TAIL_KEEP = 4
DEFAULT_RECENT_KEEP_TOKENS = 20_000
MIN_RECENT_KEEP_TOKENS = 4_000
SHRINK_THRESHOLD = 800
SHRINK_MAX_CHARS = 600
SHRINK_MIN_CHARS = 400
MIN_SUMMARY_CHARS = 20
MAX_SUMMARY_CHARS = 2_400  # ~500 words / 500 CJK characters, with headroom; longer is cut
MAX_ANCHORS = 6
ANCHOR_CHARS = 220
SUMMARY_IDLE_TIMEOUT = 30.0
SUMMARY_TOTAL_TIMEOUT = 180.0
MAX_ARCHIVE_CODES = 24
SCORE_CHARS = 800

ACK_TEXT = "好的，我已了解之前的对话上下文，请继续。"

COMPACTION_PROMPT = """你负责压缩一个投资助手与用户的对话历史，供助手在后续对话中继续工作。
用对话所用的语言写一份摘要，不超过 500 字（英文不超过 500 words），只输出摘要正文，包括：
1. 用户的目标、问题和明确给出的约束（仓位、止损、买卖纪律等）；
2. 已完成的动作：调用过的工具及关键结果（保留股票代码、价格、信号、回测数字、文件路径）；
3. 每只股票的关键结论；
4. 尚未完成的任务和待回答的问题。
不要编造，不要写“以下是摘要”之类的开场白。

You compress an investing assistant's conversation so it can continue working. Write the summary in
the conversation's language, at most 500 words, covering: the user's goals and constraints, actions
already done (tools and key results with stock codes, prices, signals, file paths), per-stock
conclusions, and unfinished tasks. Output only the summary."""

CODE_RE = re.compile(r"(?<!\d)(\d{6})(?!\d)")
# ASCII path segments only (a CJK sentence is one long \w run, and scanning it for "/" from every
# position was quadratic); start only at a segment boundary; possessive runs never backtrack.
PATH_RE = re.compile(
    r"(?<![A-Za-z0-9_./~-])(?:~|\.{1,2})?/?(?:[A-Za-z0-9_.-]++/)+[A-Za-z0-9_-][A-Za-z0-9_.-]*\.[A-Za-z0-9]{1,8}\b"
    r"|(?<![A-Za-z0-9_.-])[A-Za-z0-9_-]++\.(?:py|md|json|jsonl|csv|toml|ya?ml|txt|ts|js|sql|log|xlsx|png|ipynb)\b"
)
ARCHIVE_REF_RE = re.compile(r"archive://[\w.@-]+/[\w.-]+")
IMPORTANT_TERMS = (
    "失败", "报错", "错误", "异常", "止损", "止盈", "持仓", "建仓", "加仓", "减仓", "清仓", "买入", "卖出",
    "提交", "回测", "仓位", "成交", "委托",
    "error", "failed", "failure", "exception", "traceback", "backtest", "position", "stop loss",
    "stop-loss", "order", "todo", "sqlite", "supabase",
)  # fmt: skip
CONSTRAINT_TERMS = (
    "不要", "不买", "不追", "不能", "必须", "只买", "只做", "不超过", "以内", "至少", "最多", "永远", "从不", "别",
    "never", "always", "don't", "do not", "must", "only", "at most", "no more than",
)  # fmt: skip


# ---- ports ---------------------------------------------------------------------------------------
class ArchiveStore(Protocol):
    """Where compacted heads go (`memory.archive.FileArchiveStore`)."""

    async def save(
        self,
        session_id: str,
        messages: Sequence[Message],
        *,
        summary: str,
        anchors: Sequence[str],
        tail_start: int,
    ) -> str:
        """Persist the original messages; return their `archive://<session>/<id>` reference."""
        ...


class MemoryFlush(Protocol):
    """Extracts stable preferences from the head into long-term memory before it is dropped."""

    async def flush(self, session_id: str, head: Sequence[Message]) -> int: ...


# ---- numbers -------------------------------------------------------------------------------------
def reserve_tokens(window: int) -> int:
    """min(max(16384, min(0.25·W, 32768)), W/2): room for the reply, prompt, schemas and the next
    tool result."""
    return int(
        min(
            max(MIN_COMPACT_RESERVE_TOKENS, min(window * COMPACT_RESERVE_RATIO, MAX_COMPACT_RESERVE_TOKENS)),
            window / 2,
        )
    )


def compaction_threshold(window: int) -> int:
    return max(1, window - reserve_tokens(window))


def hard_limit(window: int) -> int:
    """Past this the request would leave less than half the reserve for the reply: the hard guard
    drops messages. Between the threshold and here a failed summary is simply retried next round."""
    return max(1, window - reserve_tokens(window) // 2)


def keep_recent_tokens(window: int) -> int:
    """The tail budget: 20K tokens, less for small windows (seed formula)."""
    threshold = compaction_threshold(window)
    if threshold <= 8000:
        return max(1000, threshold // 2)
    return min(DEFAULT_RECENT_KEEP_TOKENS, max(MIN_RECENT_KEEP_TOKENS, threshold // 2))


# ---- split ---------------------------------------------------------------------------------------
def expand_tail_for_tool_refs(messages: Sequence[Message], start: int) -> int:
    """Move `start` left until every tool result in the tail has the assistant call that issued it."""
    while start > 0:
        declared: set[str] = set()
        needed: set[str] = set()
        for msg in messages[start:]:
            if msg.role == "assistant":
                declared.update(c.id for c in msg.tool_calls)
            elif msg.role == "tool":
                needed.update(r.call_id for r in msg.tool_results)
        missing = needed - declared
        if not missing:
            return start
        new_start = start
        for i in range(start - 1, -1, -1):
            if messages[i].role == "assistant" and missing & {c.id for c in messages[i].tool_calls}:
                new_start = i
        if new_start == start:  # the calls are not in the head either: nothing to pull in
            return start
        start = new_start
    return start


def find_tail_start(
    messages: Sequence[Message], keep_tokens: int = DEFAULT_RECENT_KEEP_TOKENS, min_keep: int = TAIL_KEEP
) -> int:
    """Index where the kept tail begins: walk back accumulating estimates until `keep_tokens`, keep
    at least `min_keep` messages, never start on a tool result, keep tool results with their calls."""
    n = len(messages)
    if n == 0:
        return 0
    start, acc = 0, 0
    for i in range(n - 1, -1, -1):
        acc += estimate_message(messages[i])
        if acc >= keep_tokens:
            start = i
            break
    start = max(0, min(start, n - min_keep))
    while start > 0 and messages[start].role == "tool":
        start -= 1
    return expand_tail_for_tool_refs(messages, start)


# ---- anchors -------------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class Anchor:
    index: int
    role: str
    text: str

    def line(self) -> str:
        return f"- #{self.index} {self.role}: {self.text}"


def message_text(msg: Message, limit: int | None = None) -> str:
    """A flat text view of a message (text, tool calls, tool results) for scoring and search.
    With `limit`, at least the first `limit` characters of that view (no more than needed are
    built: tool results run to megabytes, and scoring reads only their start)."""
    pieces: list[str] = []
    size = 0
    text = msg.text
    if text:
        pieces.append(text)
        size += len(text) + 1
    for call in msg.tool_calls:
        if limit is not None and size > limit:  # (size counts a separator after each piece)
            break
        pieces.append(f"{call.name}({call.arguments_text})")
        size += len(pieces[-1]) + 1
    for result in msg.tool_results:
        if limit is not None and size > limit:  # (size counts a separator after each piece)
            break
        content = result.content if limit is None else result.content[:limit]
        pieces.append(f"[tool:{result.name}] {content}")
        size += len(pieces[-1]) + 1
    return "\n".join(pieces)


_BARE_FILE_EXT_RE = re.compile(r"\.(?:py|md|json|jsonl|csv|toml|ya?ml|txt|ts|js|sql|log|xlsx|png|ipynb)\b")
_IMPORTANT_RE = re.compile("|".join(re.escape(t) for t in IMPORTANT_TERMS))
_CONSTRAINT_RE = re.compile("|".join(re.escape(t) for t in CONSTRAINT_TERMS))


def score_message_importance(msg: Message, index: int, total: int, text: str | None = None) -> float:
    """Seed scoring: recency, user > tool call > tool result, plus stock codes, file paths,
    errors/trades/backtests and (ours) explicit user constraints."""
    # The start of a message carries its codes, paths and errors; scanning megabytes of tool JSON
    # for file paths would cost more than the rest of compaction.
    text = (message_text(msg) if text is None else text)[:SCORE_CHARS]
    lowered = text.lower()
    score = index / max(1, total)
    if msg.role == "user":
        score += 3
        if _CONSTRAINT_RE.search(lowered):
            score += 1.5
    elif msg.role == "tool":
        score += 1
        if any(r.is_error for r in msg.tool_results):
            score += 1
    if msg.tool_calls:
        score += 1.5
    if CODE_RE.search(text):
        score += 2
    # PATH_RE costs most of the scoring; without a "/" only its bare-file alternative can match,
    # which needs one of its extensions after a dot: a much cheaper test that rules most texts out
    if ("/" in text or _BARE_FILE_EXT_RE.search(text)) and PATH_RE.search(text):
        score += 1.5
    if _IMPORTANT_RE.search(lowered):
        score += 2
    return score


def _snippet(text: str, limit: int) -> str:
    """`text` with its whitespace collapsed, cut to `limit` characters."""
    # Collapse a prefix first (tool results run to megabytes): when it is already longer than
    # `limit`, its first `limit - 1` characters are those of the whole text collapsed.
    head = " ".join(text[: 2 * limit + 2].split())
    if len(head) > limit:
        return head[: limit - 1] + "…"
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def select_anchor_messages(
    head: Sequence[Message], max_items: int = MAX_ANCHORS, max_chars: int = ANCHOR_CHARS
) -> list[Anchor]:
    """The `max_items` most important head messages, in their original order, cut to `max_chars`."""
    scored = []
    texts: dict[int, str] = {}
    for i, msg in enumerate(head):
        if msg.meta.get("compaction") or msg.meta.get("internal_retry"):
            continue  # an earlier summary is summarised again, not anchored
        text = message_text(msg, max(SCORE_CHARS, max_chars * 4))
        if not text.strip():
            continue
        texts[i] = text
        scored.append((score_message_importance(msg, i, len(head), text), i))
    best = sorted(scored, key=lambda s: (-s[0], -s[1]))[:max_items]
    return [
        Anchor(i, head[i].role, _snippet(texts[i][: max_chars * 4], max_chars))
        for _, i in sorted(best, key=lambda s: s[1])
    ]


# ---- shrinking stale tool results ----------------------------------------------------------------
_TOOL_KEYS: dict[str, tuple[str, ...]] = {
    "analyze_stock": (
        "code",
        "name",
        "phase",
        "health",
        "rating",
        "signals",
        "events",
        "conclusion",
        "range",
    ),
    "portfolio": ("mode", "total_value", "cash", "positions", "holdings", "diagnosis", "warnings", "summary"),
    "run_backtest": (
        "strategy",
        "total_return",
        "annual_return",
        "max_drawdown",
        "sharpe",
        "trades",
        "win_rate",
    ),
    "screen_stocks": ("count", "total", "candidates", "top", "results"),
}
_GENERIC_KEYS = (
    "error", "message", "status", "code", "codes", "name", "symbol", "result", "summary", "conclusion",
    "phase", "health", "signal", "signals", "price", "close", "last", "change", "pct_change", "total",
    "count", "path", "result_ref", "archive_ref", "task_id", "date", "as_of",
)  # fmt: skip
_ROW_KEYS = ("bars", "daily", "kline", "klines", "rows", "data", "history", "candles")


def _compact_value(value: Any, limit: int = 160) -> str:
    if isinstance(value, list):
        shown = value[-5:]  # the latest rows matter most
        text = json.dumps(shown, ensure_ascii=False, default=str)
        if len(value) > 5:
            text = f"(last 5 of {len(value)}) {text}"
    elif isinstance(value, dict):
        text = json.dumps(value, ensure_ascii=False, default=str)
    else:
        text = str(value)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _parse_json(content: str) -> Any:
    """orjson first (a fraction of the standard library's time on these results); the standard
    library for what orjson refuses (NaN / Infinity literals); None when it is not JSON. (orjson
    reads integers beyond 64 bits as floats: fine for a 600-character digest.)"""
    try:
        return orjson.loads(content)
    except (orjson.JSONDecodeError, TypeError):
        pass
    try:
        return json.loads(content)
    except (ValueError, TypeError):
        return None


def summarize_tool_result(name: str, content: str, max_len: int = SHRINK_MAX_CHARS) -> str:
    """A structured 400–600-character stand-in for a large tool result: the tool's key fields
    (codes, names, phase/health, signals, errors, the last 5 rows) then an excerpt of the raw text."""
    header = f"[tool:{name} 原始 {len(content)} 字符，压缩摘要]"
    fields: list[str] = []
    data = _parse_json(content)
    if isinstance(data, dict):
        keys = _TOOL_KEYS.get(name, ()) + _GENERIC_KEYS
        seen: set[str] = set()
        for key in keys:
            if key in data and key not in seen:
                seen.add(key)
                fields.append(f"{key}={_compact_value(data[key])}")
        for key in _ROW_KEYS:
            if key in data and isinstance(data[key], list) and key not in seen:
                fields.append(f"{key}={_compact_value(data[key], 260)}")
                break
    elif isinstance(data, list):
        fields.append(f"items={len(data)} {_compact_value(data, 260)}")
    else:
        codes = sorted(set(CODE_RE.findall(content)))[:8]
        if codes:
            fields.append("codes=" + ",".join(codes))
        errors = [ln.strip() for ln in content.splitlines() if re.search(r"error|失败|报错|错误", ln, re.I)]
        if errors:
            fields.append("error=" + _snippet(errors[0], 160))
    body = header + " " + "; ".join(fields)
    if len(body) < SHRINK_MIN_CHARS:  # pad with the start of the raw text so the model keeps context
        room = max(0, max_len - len(body) - 4)
        body += " | 摘录: " + _snippet(content, room)
    return body if len(body) <= max_len else body[: max_len - 1] + "…"


def shrink_stale_tool_results(head: Sequence[Message], threshold: int = SHRINK_THRESHOLD) -> list[Message]:
    """A copy of `head` whose tool results longer than `threshold` are structured summaries.
    Messages are immutable, so the stored history can never be rewritten by this."""
    out: list[Message] = []
    for msg in head:
        if msg.role != "tool" or not any(len(r.content) > threshold for r in msg.tool_results):
            out.append(msg)
            continue
        parts = tuple(
            p.model_copy(update={"content": summarize_tool_result(p.name, p.content)})
            if isinstance(p, ToolResultPart) and len(p.content) > threshold
            else p
            for p in msg.parts
        )
        out.append(msg.model_copy(update={"parts": parts}))
    return out


def serialize_for_summary(head: Sequence[Message], max_chars: int | None = None) -> str:
    """Plain text for the summariser: `[role] text`, `[assistant:tool_call] name(args)`,
    `[tool:name] result`. When over `max_chars` the middle is elided (start and end matter most)."""
    lines: list[str] = []
    for msg in head:
        if msg.meta.get("compaction") == "ack" or msg.meta.get("internal_retry"):
            continue
        if msg.meta.get("compaction") == "summary":
            lines.append(f"[earlier summary] {msg.text}")
            continue
        if msg.text:
            lines.append(f"[{msg.role}] {msg.text}")
        for call in msg.tool_calls:
            lines.append(f"[assistant:tool_call] {call.name}({call.arguments_text[:80]})")
        for result in msg.tool_results:
            flag = " error" if result.is_error else ""
            lines.append(f"[tool:{result.name}{flag}] {result.content}")
    text = "\n".join(lines)
    if max_chars and len(text) > max_chars:
        half = max_chars // 2
        text = text[:half] + "\n…(中间部分已省略 / middle elided)…\n" + text[-half:]
    return text


# ---- hard guard ----------------------------------------------------------------------------------
def enforce_context_limit(
    messages: Sequence[Message], limit: int, overhead_tokens: int = 0
) -> tuple[list[Message], int]:
    """Drop the oldest messages until the estimate is ≤ `limit`. Never leaves a tool result without
    its call, never starts the kept part on a tool result, keeps at least one message, and keeps a
    leading compaction summary as long as anything else can go. Returns (messages, dropped)."""
    msgs = list(messages)
    sizes = [estimate_message(m) for m in msgs]
    total = sum(sizes) + overhead_tokens
    if total <= limit:
        return msgs, 0
    prefix = 0
    while prefix < len(msgs) and msgs[prefix].meta.get("compaction") in ("summary", "ack"):
        prefix += 1
    body_sizes = sizes[prefix:]
    body_total = sum(body_sizes)
    budget = limit - overhead_tokens - sum(sizes[:prefix])
    cut = 0
    while cut < len(body_sizes) - 1 and body_total > budget:
        body_total -= body_sizes[cut]
        cut += 1
    body = msgs[prefix:]
    while cut < len(body) and body[cut].role == "tool":
        cut += 1
    if cut >= len(body):  # only tool results left: keep the last call with its results
        cut = max((i for i, m in enumerate(body) if m.role != "tool"), default=0)
    kept = body[cut:]
    head = msgs[:prefix]
    if head and sum(estimate_message(m) for m in head + kept) + overhead_tokens > limit:
        head = []  # even the summary does not fit any more
    if head and head[-1].meta.get("compaction") == "ack" and kept and kept[0].role == "assistant":
        head = head[:-1]
    out = head + kept
    return out, len(msgs) - len(out)


# ---- the compactor -------------------------------------------------------------------------------
@dataclass
class CompactionResult:
    messages: list[Message]
    before_messages: int
    after_messages: int
    before_tokens: int
    after_tokens: int
    archive_ref: str | None = None
    dropped: int = 0
    summarized: bool = False
    note: str = ""
    anchors: list[Anchor] = field(default_factory=list)

    def event(self) -> ev.Compaction:
        return ev.Compaction(
            before_messages=self.before_messages,
            after_messages=self.after_messages,
            archive_ref=self.archive_ref,
            dropped=self.dropped,
            note=self.note,
        )


class SummaryFailed(Exception):
    """The summariser failed or produced nothing usable (the messages stay unchanged)."""


class Compactor:
    """Runs the pipeline for one session's history. Stateless between calls; safe to share."""

    def __init__(
        self,
        *,
        archive: ArchiveStore | None = None,
        flush: MemoryFlush | None = None,
        summarizer: ModelClient | None = None,
        keep_recent_tokens: int | None = None,
        max_anchors: int = MAX_ANCHORS,
        min_summary_chars: int = MIN_SUMMARY_CHARS,
        summary_idle_timeout: float = SUMMARY_IDLE_TIMEOUT,
        summary_total_timeout: float = SUMMARY_TOTAL_TIMEOUT,
    ):
        self.archive = archive
        self.flush = flush
        self.summarizer = summarizer
        self.keep_recent_tokens = keep_recent_tokens
        self.max_anchors = max_anchors
        self.min_summary_chars = min_summary_chars
        self.summary_idle_timeout = summary_idle_timeout
        self.summary_total_timeout = summary_total_timeout

    async def maybe_compact(
        self,
        session_id: str,
        messages: Sequence[Message],
        *,
        model_info: ModelInfo,
        overhead_tokens: int,
        force: bool = False,
        client: ModelClient | None = None,
    ) -> CompactionResult | None:
        """Compact when the estimate passes `W − reserve` (or when `force`d, e.g. `/compact`).
        Returns None when nothing changed. `client` is the summariser when none was configured."""
        window = model_info.context_window
        threshold = compaction_threshold(window)
        if not force and messages_within(messages, threshold - overhead_tokens):
            return None  # surely below the threshold: no need to count (most turns)
        history_tokens = estimate_messages(messages)
        before = history_tokens + overhead_tokens
        if not force and before <= threshold:
            return None
        out: list[Message] = list(messages)
        archive_ref: str | None = None
        summarized = False
        notes: list[str] = []
        anchors: list[Anchor] = []
        if len(messages) > TAIL_KEEP + 2:
            keep = self.keep_recent_tokens or keep_recent_tokens(window)
            if force:  # /compact on a short history still has something to fold
                keep = min(keep, max(1, history_tokens // 2))
            tail_start = find_tail_start(messages, keep)
            if tail_start > 2:
                try:
                    out, archive_ref, anchors = await self._compact_head(
                        session_id, list(messages), tail_start, window, client
                    )
                    summarized = True
                except SummaryFailed as exc:
                    log.warning("compaction skipped for session %s: %s", session_id, exc)
                    notes.append(f"summary failed ({exc}); history kept")
        dropped = 0
        limit = hard_limit(window)
        if estimate_messages(out) + overhead_tokens > limit:
            kept, dropped = enforce_context_limit(out, threshold, overhead_tokens)
            if dropped:
                log.warning("context overflow in session %s: dropped %d oldest messages", session_id, dropped)
                notes.append(f"dropped {dropped} oldest messages to fit the context window")
                kept_ids = {id(m) for m in kept}
                lost = [m for m in out if id(m) not in kept_ids]
                ref = await self._archive_dropped(session_id, lost)
                if ref:
                    notes.append(f"dropped messages archived as {ref}")
                    archive_ref = archive_ref or ref
            out = kept
        if not summarized and not dropped:
            if notes:
                log.info("compaction for session %s changed nothing: %s", session_id, "; ".join(notes))
                if force:  # asked for (/compact): a failure is reported as one, not as "nothing to do"
                    raise CompactionFailed("; ".join(notes))
            return None
        after = estimate_messages(out) + overhead_tokens
        head_note = (
            f"Context compacted: {len(messages)} → {len(out)} messages (~{before:,} → ~{after:,} tokens)"
        )
        if archive_ref:
            head_note += f"; originals archived as {archive_ref}"
        return CompactionResult(
            messages=out,
            before_messages=len(messages),
            after_messages=len(out),
            before_tokens=before,
            after_tokens=after,
            archive_ref=archive_ref,
            dropped=dropped,
            summarized=summarized,
            note="; ".join([head_note, *notes]),
            anchors=anchors,
        )

    async def _archive_dropped(self, session_id: str, lost: list[Message]) -> str | None:
        if self.archive is None or not lost:
            return None
        try:
            return await self.archive.save(
                session_id, lost, summary="(dropped by the context-window guard)", anchors=[], tail_start=0
            )
        except Exception:
            log.exception("archiving dropped messages of session %s failed", session_id)
            return None

    async def _compact_head(
        self,
        session_id: str,
        messages: list[Message],
        tail_start: int,
        window: int,
        client: ModelClient | None,
    ) -> tuple[list[Message], str | None, list[Anchor]]:
        head, tail = messages[:tail_start], messages[tail_start:]
        anchors = select_anchor_messages(head, self.max_anchors)
        shrunk = shrink_stale_tool_results(head)
        if self.flush is not None:
            try:
                saved = await self.flush.flush(session_id, head)
                if saved:
                    log.info("flushed %d preference(s) before compacting session %s", saved, session_id)
            except Exception:  # a memory problem must not block compaction
                log.exception("memory flush before compaction failed (session %s)", session_id)
        # Bound the summariser's input well inside its window (a CJK character can be >1 token).
        head_text = serialize_for_summary(shrunk, max_chars=max(4000, compaction_threshold(window) * 2 // 3))
        summary = await self._summarize(head_text, client)
        archive_ref: str | None = None
        if self.archive is not None:
            try:
                archive_ref = await self.archive.save(
                    session_id,
                    head,
                    summary=summary,
                    anchors=[a.line() for a in anchors],
                    tail_start=tail_start,
                )
            except Exception:  # tolerated: the summary still frees the window
                log.exception("archiving the compacted head of session %s failed", session_id)
        codes = sorted(set(CODE_RE.findall(head_text)))[:MAX_ARCHIVE_CODES]
        return assemble(summary, anchors, archive_ref, codes, tail), archive_ref, anchors

    async def _summarize(self, head_text: str, client: ModelClient | None) -> str:
        model = self.summarizer or client
        if model is None:
            raise SummaryFailed("no summariser model configured")
        request = ModelRequest(
            messages=[Message.user(head_text)], system=COMPACTION_PROMPT, max_tokens=1500, temperature=0.2
        )
        pieces: list[str] = []

        async def consume() -> None:
            stream = model.stream(request).__aiter__()
            while True:
                try:
                    chunk = await asyncio.wait_for(stream.__anext__(), self.summary_idle_timeout)
                except StopAsyncIteration:
                    return
                if isinstance(chunk, TextChunk):
                    pieces.append(chunk.text)

        try:
            await asyncio.wait_for(consume(), self.summary_total_timeout)
        except TimeoutError:
            raise SummaryFailed("the summary stream timed out") from None
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            raise SummaryFailed(f"the summary request failed: {type(exc).__name__}: {exc}") from exc
        summary = "".join(pieces).strip()
        if len(summary) < self.min_summary_chars:
            raise SummaryFailed(f"the summary was too short ({len(summary)} characters)")
        if len(summary) > MAX_SUMMARY_CHARS:
            summary = summary[: MAX_SUMMARY_CHARS - 1] + "…"
        return summary


def assemble(
    summary: str,
    anchors: Sequence[Anchor],
    archive_ref: str | None,
    codes: Sequence[str],
    tail: Sequence[Message],
) -> list[Message]:
    """summary + anchors + archive reference as one user message, an acknowledgement when the tail
    starts with a user message (keeps roles alternating), then the untouched tail."""
    sections = ["[对话摘要]", summary]
    if anchors:
        sections += ["", "[动态保留片段]", *(a.line() for a in anchors)]
    if archive_ref or codes:
        sections += ["", "[可恢复归档]"]
        if archive_ref:
            sections.append(f"- {archive_ref}")
            sections.append(f'- 原文可用 query_history(source="archive", archive_ref="{archive_ref}") 恢复')
        if codes:
            sections.append("- 涉及标的：" + ", ".join(codes))
    first = Message.user("\n".join(sections), compaction="summary", archive_ref=archive_ref)
    out = [first]
    if tail and tail[0].role != "assistant":
        out.append(Message.assistant(ACK_TEXT, compaction="ack"))
    out.extend(tail)
    return out
