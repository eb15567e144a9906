"""What a chat sees of background tasks and the extra `/status` lines, in its language:
the progress message and its closing line, `/tasks` lines, and `/status`'s market calendar, task,
brief and MCP lines after `/lang zh`. The notification for the model stays English."""

from __future__ import annotations

import asyncio
import re
from datetime import UTC, datetime, timedelta

from agent.background_tasks import TaskManager
from agent.background_tools import describe_task, task_notification_text
from agent.task_ledger import InMemoryTaskStore, TaskRecord
from bot.commands.background import StatusExtras
from bot.i18n_tasks import task_done_text, task_progress_text
from markets.data import MarketData
from markets.services import MarketServices

START = datetime(2027, 1, 4, 1, tzinfo=UTC)


def record(**kw) -> TaskRecord:
    base = {"id": "t1", "session_id": "s1", "chat_key": "tg:1", "tool_name": "run_backtest"}
    return TaskRecord(**(base | kw))


def test_progress_and_done_lines_in_both_languages():
    running = record(status="running", stage="", percent=40.0, detail="day 4")
    assert task_progress_text("en", running) == "⏳ run_backtest · t1: running 40% day 4"
    assert task_progress_text("zh", running) == "⏳ run_backtest · t1: 运行中 40% day 4"
    assert task_progress_text("zh", record(status="queued")) == "⏳ run_backtest · t1: 排队中"
    staged = record(status="running", stage="simulating")
    assert task_progress_text("zh", staged) == "⏳ run_backtest · t1: simulating"  # the tool's own words
    assert task_done_text("en", record(status="succeeded")) == "✓ run_backtest · t1 · succeeded"
    assert task_done_text("zh", record(status="succeeded")) == "✓ run_backtest · t1 · 已完成"
    assert task_done_text("zh", record(status="timed_out")) == "✗ run_backtest · t1 · 超时"
    assert task_done_text("en", record(status="timed_out")) == "✗ run_backtest · t1 · timed out"


def test_tasks_lines_in_chinese_and_the_model_notice_stays_english():
    done = record(
        status="failed", started_at=START, finished_at=START + timedelta(seconds=125), error="no data"
    )
    assert describe_task(done, lang="zh") == "t1 · run_backtest · 失败 · 2 分 05 秒 · no data"
    assert describe_task(done) == "t1 · run_backtest · failed · 2m 05s · no data"
    long = record(status="succeeded", started_at=START, finished_at=START + timedelta(hours=2, minutes=5))
    assert describe_task(long, lang="zh").endswith("已完成 · 2 小时 05 分")
    running = record(status="running", started_at=START)
    assert describe_task(running, START + timedelta(seconds=9), lang="zh").endswith("运行中 · 9 秒")
    notice = task_notification_text(done)
    assert "run_backtest failed: no data" in notice and "失败" not in notice


class _Mcp:
    """The MCP manager's `status(lang)` as /status calls it (its own lines are tested in tests/mcp)."""

    def status(self, lang: str = "en") -> list[str]:
        return ["toy: 就绪，9 个工具（toy）"] if lang == "zh" else ["toy: ready, 9 tool(s) (toy)"]


class _Schedules:
    def __init__(self):
        self.langs: list[str] = []

    async def status_lines(self, chat_key: str, *, lang: str = "en") -> list[str]:
        self.langs.append(lang)
        return []


async def test_status_extra_speaks_the_chats_language():
    manager = TaskManager(InMemoryTaskStore())
    gate = asyncio.Event()

    async def work(progress):
        await gate.wait()
        return "ok"

    rec = await manager.submit("s1", "tg:1", "run_backtest", "c1", work)
    schedules = _Schedules()
    market = MarketServices(data=MarketData())
    extras = StatusExtras(market.calendar_warning, manager, schedules, _Mcp().status)  # type: ignore[arg-type]
    try:
        zh = "\n".join(await extras("tg:1", "s1", "zh", now=START))
        en = "\n".join(await extras("tg:1", "s1", "en", now=START))
    finally:
        gate.set()
        await manager.wait(rec.id)
    assert f"{rec.id} run_backtest 运行中" in zh and schedules.langs == ["zh", "en"]
    assert "Market calendar: the SSE trading calendar ends 2026-12-31" in en
    assert f"{rec.id} run_backtest running" in en
    assert zh.splitlines()[0].startswith("交易日历：SSE 交易日历只到 2026-12-31")
    assert "toy: 就绪" in zh


def test_a_tools_failure_word_in_both_languages():
    from agent.errors import InvalidToolArguments, ToolDenied, ToolFailed, ToolNotFound, ToolTimedOut
    from bot.i18n_tasks import failure_text
    from bot.progress import _FAILED_STATUSES

    codes = {
        *_FAILED_STATUSES,
        *(e.code for e in (InvalidToolArguments, ToolDenied, ToolFailed, ToolNotFound, ToolTimedOut)),
    }
    for code in codes:  # every word a ✗ line can show has both languages
        assert failure_text("en", code) != code or code in (
            "rejected",
            "failed",
            "error",
            "denied",
            "cancelled",
            "expired",
        )
        assert re.search(r"[\u4e00-\u9fff]", failure_text("zh", code)), code
    assert failure_text("zh", "timed_out") == "超时" and failure_text("en", "timed_out") == "timed out"
    assert failure_text("zh", "canceled") == "已取消"
    assert failure_text("zh", "something_new") == "something_new"


async def test_a_turns_cross_line_names_the_failure_in_chinese():
    """The turn's progress message after `/lang zh`: "✗ 下单: 被拒绝", "✗ backtest: 超时"."""
    import json

    from agent import events as ev
    from bot.delivery import ProgressBoard, TurnView
    from tests.bot.test_bot_liveness import CHAT, Recording
    from tests.fakes.clock import FakeClock

    async def nothing(_e):
        pass

    ad = Recording()
    view = TurnView(
        ad,
        CHAT,
        "zh",
        on_approval=nothing,
        on_question=nothing,
        board=ProgressBoard(),
        sleep=FakeClock(auto=False, poll=0.002).sleep,
    )
    for event in (
        ev.ToolStart("c1", "execute_trade", {}),
        ev.ToolResult("c1", "execute_trade", json.dumps({"status": "rejected", "reason": "T+1"}), 0.2),
        ev.ToolStart("c2", "backtest", {}),
        ev.ToolErrorEvent("c2", "backtest", "timed_out", "took too long"),
        ev.Done("ok", "t1"),
    ):
        await view.render(event)
    await view.close()
    (progress,) = ad.sent.values()
    assert progress.splitlines() == ["✗ 下单: 被拒绝", "✗ backtest: 超时"], (
        progress
    )  # a label where one exists


def test_rules_list_describes_each_scope_in_the_chats_language():
    from datetime import UTC, datetime, timedelta

    from agent.consent import StandingApproval, StandingScope
    from bot.approval_rules import format_rules

    now = datetime(2026, 12, 3, 9, 0, tzinfo=UTC)
    scope = StandingScope(
        tool="execute_trade", kind="trade", instrument="600519", side="buy", max_quantity=100
    )
    rule = StandingApproval("r1", "telegram:1", scope, "42", now, now + timedelta(hours=24))
    zh, en = format_rules([rule], "zh"), format_rules([rule], "en")
    assert scope.describe("zh") in zh and scope.describe("en") not in zh
    assert scope.describe("en") in en
