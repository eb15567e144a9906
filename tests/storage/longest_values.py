"""The longest value the code writes into each length-limited text column, derived from the code
that makes it: the id and key builders are called with the longest parts they can be given (ids of
64-bit platforms, the longest host name Linux allows, ...), vocabularies are read from the types
that define them. A column whose values have no bound the code controls (a provider's call id, a
model name) is `UNBOUNDED`: it must be declared without a length.

SQLite ignores declared lengths; PostgreSQL refuses a longer value, and the write (an approved
trade, a turn, ...) fails. `test_storage_column_limits.py` holds every column to its entry here.
"""

from __future__ import annotations

import secrets
import typing
import zoneinfo
from collections.abc import Callable
from datetime import UTC, datetime

from adapters.base import ChatRef, UserRef

UNBOUNDED = None

# Telegram and Discord ids are 64-bit integers: the longest is a negative one with 19 digits.
LONGEST_PLATFORM_ID = str(-(2**63))
PLATFORMS = ("telegram", "discord", "terminal")
HOST_NAME_MAX = 64  # Linux: what socket.gethostname() can return
PID_MAX = 4194304  # Linux: /proc/sys/kernel/pid_max at most


def longest(values: typing.Iterable[str]) -> str:
    return max(values, key=len)


def literal(tp: object) -> str:
    return longest(typing.get_args(tp))


def chat_ref(platform: str) -> ChatRef:
    if platform == "terminal":  # one chat, keyed by the platform's name
        return ChatRef(platform, "")
    return ChatRef(platform, LONGEST_PLATFORM_ID, LONGEST_PLATFORM_ID, is_group=True)


def user_id() -> str:
    return LONGEST_PLATFORM_ID


def chat_key() -> str:
    from bot.chats import chat_key as key_of

    return longest(
        key_of(chat_ref(p), UserRef(p, LONGEST_PLATFORM_ID), group_sessions)
        for p in PLATFORMS
        for group_sessions in ("per_user", "shared")
    )


def session_id() -> str:
    from agent.subagents import SUBAGENTS
    from bot.chats import ChatDirectory

    return longest(
        (
            ChatDirectory._new_session_id(chat_key()),
            f"mcp:{secrets.token_hex(4)}",  # bot/mcp_gate.py: one MCP server instance
            *(f"subagent-{name}-{secrets.token_hex(4)}" for name in SUBAGENTS),
        )
    )


def turn_id() -> str:
    return longest(("t_" + secrets.token_hex(6), f"mcp:{secrets.token_hex(4)}"))


def tool_name() -> str:
    from agent.mcp_client import NAME_LIMIT, namespaced

    # an MCP tool is namespaced to at most NAME_LIMIT; built-in tools are shorter than that
    return namespaced("s" * 200, "t" * 200) + "x" * max(0, NAME_LIMIT - len(namespaced("s" * 200, "t" * 200)))


def approval_id() -> str:
    from agent.approval import new_approval_id

    return new_approval_id()


def args_hash() -> str:
    from agent.ports import args_hash as hash_of

    return hash_of("t", {"a": 1})


def request_hash() -> str:
    from agent.ports import execution_key

    return execution_key(session_id(), tool_name(), {"symbol": "600519", "quantity": 100}, "call_x")


def idempotency_key() -> str:
    from agent.ports import client_key, execution_key

    return longest(
        (
            execution_key(session_id(), tool_name(), {"q": 1}, "c"),
            client_key("mcp", user_id(), "k" * 500),
        )
    )


def scheduler_owner() -> str:
    # scheduler/app_scheduler.py default_owner_id(), with the longest host name and pid the kernel allows
    return f"{'h' * HOST_NAME_MAX}:{PID_MAX}:{secrets.token_hex(3)}"


def schedule_claim() -> str:
    return f"{scheduler_owner()}/{secrets.token_hex(4)}"  # scheduler/store.py: a claim's token


def timezone() -> str:
    return longest(zoneinfo.available_timezones())


def message_id() -> str:
    return LONGEST_PLATFORM_ID


def update_id() -> str:
    # Telegram update ids and callback query ids ("cq" + a 64-bit id), Discord message and
    # interaction ids, the terminal's run id and counter
    return longest((LONGEST_PLATFORM_ID, f"cq{LONGEST_PLATFORM_ID}", f"{secrets.token_hex(4)}:{2**63}"))


def schedule_spec() -> str:
    from scheduler.specs import BriefSpec, Days

    return longest(BriefSpec(days, "23:59", None).text for days in typing.get_args(Days))


def identity() -> str:
    from memory.links import identity_key

    return longest(identity_key(p, LONGEST_PLATFORM_ID) for p in PLATFORMS)


def account() -> str:
    """A book's key: a user id, a group's own (bot/chats.py group_account), or the fresh book of an
    identity that left a link (memory/links.py)."""
    from bot.chats import group_account

    return longest((user_id(), "default", identity(), *(group_account(chat_ref(p)) for p in PLATFORMS)))


def link_name() -> str:
    return "n" * 255  # memory/links.py keeps at most 255 characters of a display name


def link_code_hash() -> str:
    from memory.links import code_hash, new_code

    return code_hash(new_code())


def market_user() -> str:
    return account()


def instrument_symbol() -> str:
    # markets/symbols.py: "600519.SH", or a crypto pair of at most 10 + 4 characters
    return longest(("600519.SH", "A" * 10 + "USDT"))


def instrument_name() -> str:
    from markets.portfolio import MAX_NAME_CHARS

    return "名" * MAX_NAME_CHARS


def market_name() -> str:
    from markets.strategies import MAX_NAME_CHARS

    return "n" * MAX_NAME_CHARS


def memory_scope() -> str:
    return longest((user_id(), "default", identity()))  # a linked account: see account()


def memory_source_ref() -> str:
    return longest((f"chat_log:{session_id()}", f"layer_refresh:{'f' * 16}"))


def kv_key() -> str:  # the only writer: the Discord adapter's command digest
    from adapters.discord import KV_COMMANDS_HASH

    return f"{KV_COMMANDS_HASH}:{LONGEST_PLATFORM_ID}:guild"


def run_date() -> str:
    return datetime(9999, 12, 31, tzinfo=UTC).date().isoformat()


def _vocab(*values: str) -> Callable[[], str]:
    return lambda: longest(values)


def _lit(tp: object) -> Callable[[], str]:
    return lambda: literal(tp)


def registry() -> dict[tuple[str, str], Callable[[], str] | None]:
    from agent.approval import Decision, new_rule_id
    from agent.messages import Role
    from agent.ports import ApprovalStatus, TurnStatus
    from agent.task_ledger import TaskStatus, new_task_id
    from markets.alerts import WYCKOFF_EVENTS, AlertKind
    from markets.bars import Adjust
    from markets.broker import client_order_id
    from markets.rules import Side
    from markets.symbols import Market
    from memory.longterm import TYPE_RULES, MemoryType, SourceKind
    from scheduler.store import new_schedule_id

    approval_decisions = _vocab(*typing.get_args(Decision), *typing.get_args(ApprovalStatus))
    sent_kinds = _vocab("question", "progress", "partial")
    langs = _vocab("en", "zh")
    platform = _vocab(*PLATFORMS)
    return {
        ("approvals", "id"): approval_id,
        ("approvals", "session_id"): session_id,
        ("approvals", "turn_id"): turn_id,
        ("approvals", "call_id"): UNBOUNDED,  # the provider's id for the call
        ("approvals", "tool"): tool_name,
        ("approvals", "args_hash"): args_hash,
        ("approvals", "requester"): user_id,
        ("approvals", "chat_key"): chat_key,
        ("approvals", "status"): _lit(ApprovalStatus),
        ("approvals", "decided_by"): user_id,
        ("approvals", "decision"): approval_decisions,
        ("approvals", "message_ref"): message_id,
        ("background_tasks", "id"): new_task_id,
        ("background_tasks", "session_id"): session_id,
        ("background_tasks", "chat_key"): chat_key,
        ("background_tasks", "tool_name"): tool_name,
        ("background_tasks", "call_id"): UNBOUNDED,
        ("background_tasks", "status"): _lit(TaskStatus),
        ("background_tasks", "stage"): lambda: "s" * 200,  # agent/background_tasks.py cuts it to 200
        ("background_tasks", "owner"): lambda: f"tm_{secrets.token_hex(6)}",
        ("chat_timezones", "chat_key"): chat_key,
        ("chat_timezones", "tz"): timezone,
        ("chats", "key"): chat_key,
        ("chats", "platform"): platform,
        ("chats", "chat_id"): message_id,
        ("chats", "thread_id"): message_id,
        ("chats", "session_id"): session_id,
        ("chats", "lang"): langs,
        ("chats", "model"): UNBOUNDED,  # a configured or provider-given model name
        ("chats", "owner"): user_id,
        ("kv", "key"): kv_key,
        ("market_accounts", "user_id"): market_user,
        ("market_accounts", "market"): _lit(Market),
        ("market_accounts", "currency"): _vocab("CNY", "USDT"),
        ("market_bar_cache", "source"): _vocab("bundled", "csv", "akshare", "binance", "eastmoney", "sina"),
        ("market_bar_cache", "symbol"): instrument_symbol,
        ("market_bar_cache", "adjust"): _lit(Adjust),
        ("market_alerts", "user_id"): market_user,
        ("market_alerts", "chat_key"): chat_key,
        ("market_alerts", "symbol"): instrument_symbol,
        ("market_alerts", "market"): _lit(Market),
        ("market_alerts", "kind"): _lit(AlertKind),
        ("market_alerts", "event"): lambda: longest(WYCKOFF_EVENTS),
        ("market_alerts", "status"): _vocab("active", "done", "removed"),
        ("market_alert_triggers", "chat_key"): chat_key,
        ("market_alert_triggers", "symbol"): instrument_symbol,
        ("market_alert_triggers", "status"): _vocab("pending", "sending", "delivered", "failed"),
        ("market_watchlist", "user_id"): market_user,
        ("market_watchlist", "symbol"): instrument_symbol,
        ("market_watchlist", "market"): _lit(Market),
        ("market_holding_cash", "user_id"): market_user,
        ("market_holding_cash", "market"): _lit(Market),
        ("market_holding_cash", "currency"): _vocab("CNY", "USDT"),
        ("market_holdings", "user_id"): market_user,
        ("market_holdings", "market"): _lit(Market),
        ("market_holdings", "symbol"): instrument_symbol,
        ("market_holdings", "name"): instrument_name,
        ("market_positions", "user_id"): market_user,
        ("market_positions", "market"): _lit(Market),
        ("market_positions", "symbol"): instrument_symbol,
        ("market_positions", "name"): instrument_name,
        ("market_records", "user_id"): market_user,
        ("market_records", "kind"): _vocab(
            "analysis", "recommendation", "screen", "backtest", "report", "portfolio_update"
        ),
        ("market_records", "symbol"): instrument_symbol,
        ("market_strategies", "user_id"): market_user,
        ("market_strategies", "name"): market_name,
        ("market_traders", "user_id"): market_user,
        ("market_traders", "name"): market_name,
        ("market_traders", "market"): _lit(Market),
        ("market_traders", "status"): _vocab("stopped", "running"),
        ("market_trades", "idempotency_key"): idempotency_key,
        ("market_trades", "request_hash"): request_hash,
        ("market_trades", "user_id"): market_user,
        ("market_trades", "market"): _lit(Market),
        ("market_trades", "symbol"): instrument_symbol,
        ("market_trades", "side"): _lit(Side),
        ("market_trades", "status"): _vocab(
            "pending", "filled", "rejected", "unknown", "waiting", "cancelled"
        ),
        ("market_trades", "venue"): _vocab("paper", "manual", "live:binance"),
        ("market_trades", "source"): _vocab("chat", "mcp", "manual", f"trader:{2**31}"),
        ("market_trades", "external_id"): lambda: client_order_id("k"),
        ("memories", "scope"): memory_scope,
        ("memories", "memory_type"): _lit(MemoryType),
        ("memories", "level"): lambda: longest(r.level for r in TYPE_RULES.values()),
        ("memories", "codes"): UNBOUNDED,  # every code named in a memory, comma-separated
        ("memories", "scope_tag"): lambda: __import__("memory.longterm").longterm.scope_tag("x"),
        ("memories", "source_ref"): memory_source_ref,
        ("memories", "source_kind"): _lit(SourceKind),
        ("memory_codes", "code"): instrument_symbol,
        ("memory_codes", "scope"): memory_scope,
        ("memory_markers", "scope"): memory_scope,
        # memory/extraction.py: a batch's or a source's hash (16 hex), or "latest"
        ("memory_markers", "kind"): _vocab("summary", "layer_source", "layer_refresh"),
        ("memory_markers", "key"): _vocab("f" * 16, "latest"),
        ("messages", "session_id"): session_id,
        ("messages", "role"): _lit(Role),
        ("identity_links", "identity"): identity,
        ("identity_links", "account"): account,
        ("identity_links", "name"): link_name,
        ("link_codes", "code_hash"): link_code_hash,
        ("link_codes", "identity"): identity,
        ("link_codes", "name"): link_name,
        ("link_failures", "identity"): identity,
        ("paired_users", "platform"): platform,
        ("paired_users", "user_id"): user_id,
        ("processed_updates", "platform"): platform,
        ("processed_updates", "update_id"): update_id,
        ("replica_inbox", "chat_key"): chat_key,
        ("replica_inbox", "platform"): platform,
        ("replica_inbox", "update_id"): update_id,
        ("schedule_runs", "schedule_id"): new_schedule_id,
        ("schedule_runs", "run_date"): run_date,
        ("schedule_runs", "status"): _vocab("running", "delivered", "interrupted", "failed", "skipped"),
        ("schedule_runs", "owner"): schedule_claim,
        ("scheduler_leases", "name"): _vocab("scheduler"),
        ("scheduler_leases", "owner"): scheduler_owner,
        # scheduler/app.py: a brief's job, or a housekeeping chore's (bot/parts.py, scheduler/app.py)
        ("scheduler_next_runs", "job_id"): lambda: longest(
            (
                __import__("scheduler.store").store.brief_job_id(new_schedule_id()),
                *(
                    "housekeeping:" + name
                    for name in (
                        "cleanup_tasks",
                        "prune_memory",
                        "run_traders",
                        "refresh_cn",
                        "refresh_crypto",
                        "prune_schedule_runs",
                        "prune_traces",
                    )
                ),
            )
        ),
        ("scheduler_leases", "subject"): chat_key,  # a chat lease's chat (bot/replicas.py)
        ("schedules", "id"): new_schedule_id,
        ("schedules", "chat_key"): chat_key,
        ("schedules", "kind"): _vocab("brief"),
        ("schedules", "spec"): schedule_spec,
        ("schedules", "tz"): timezone,
        ("schedules", "created_by"): user_id,
        ("schedules", "last_status"): _vocab("delivered", "interrupted", "failed", "skipped"),
        ("sent_messages", "kind"): sent_kinds,
        ("sent_messages", "ref_id"): lambda: longest((turn_id(), chat_key())),
        ("sent_messages", "platform"): platform,
        ("sent_messages", "chat_id"): message_id,
        ("sent_messages", "thread_id"): message_id,
        ("sent_messages", "message_id"): message_id,
        ("sent_messages", "lang"): langs,
        ("sessions", "id"): session_id,
        ("sessions", "chat_key"): chat_key,
        ("sessions", "user_id"): user_id,
        ("sessions", "title"): lambda: "",  # never written: every session is untitled
        ("sessions", "model"): UNBOUNDED,
        ("standing_approvals", "id"): new_rule_id,
        ("standing_approvals", "chat_key"): chat_key,
        ("standing_approvals", "tool"): tool_name,
        ("standing_approvals", "granted_by"): user_id,
        ("standing_approvals", "approval_id"): approval_id,
        ("task_states", "session_id"): session_id,
        ("turns", "id"): turn_id,
        ("turns", "session_id"): session_id,
        ("turns", "status"): _lit(TurnStatus),
        ("usage", "session_id"): session_id,
        ("usage", "turn_id"): turn_id,
        ("usage", "model"): UNBOUNDED,
    }
