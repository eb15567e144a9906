"""The composition root: builds every part of tapebot from `Settings` and owns their lifecycles.

    App(settings)                      →  database, stores, models, tools, market data, memory,
                                          runtime: complete, no I/O (nothing connects yet)
    App.start(adapters=...)            →  database opened (migrations), MCP servers, then the
                                          gateway + chat adapters and the scheduler, as asked
    App.stop()                         →  the reverse, in order, with tracked tasks drained

Nothing else constructs long-lived resources; modules receive what they need as arguments. The
builders that need only settings and other parts are functions in bot/parts.py; `tapebot run` (the
process: logging, signals, the heap) is bot/run.py.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
from collections.abc import Awaitable, Callable, Sequence
from datetime import timedelta
from functools import partial
from typing import TYPE_CHECKING, Any

from agent import AgentRuntime, ModelClient, NoticeDeferred, RuntimeConfig
from agent.approval import ApprovalGate
from agent.ports import AccountDirectory
from agent.redact import Redactor, install_log_redaction
from agent.scratchpad import BackgroundWriter, Scratchpad
from agent.tools.builtin import local_tools
from agent.tools.core import core_tools
from agent.tools.registry import Deps, Toolset
from agent.tools.workspace import LocalToolPolicy
from bot.parts import (
    REFRESH_TIMES,
    alert_ops,
    brief_data_line,
    housekeeping_jobs,
    local_policy,
    market_data_status,
    market_refresh_jobs,
    warned_trading_days,
)
from bot.replicas import new_replica_id
from config.filemodes import loose_modes, private_umask
from config.settings import Settings
from memory.db import Database
from memory.links import LinkStore
from memory.stores import SqlStore

if TYPE_CHECKING:  # the parts' types only: each is imported where (and when) it is built
    from adapters.base import ChatAdapter
    from agent import (
        ApprovalRecord,
        CompactingHooks,
        TaskRecord,
        TurnRecord,
        UsageRecord,
    )
    from bot.alert_poll import IntradayAlertPoll
    from bot.briefs import BriefRunner
    from bot.chat_setup import ChatParts
    from bot.gateway import Gateway
    from markets.preview import TradePreview
    from markets.services import MarketServices
    from memory.hooks import MemoryContextHooks
    from memory.tools import MemoryServices
    from scheduler.app_scheduler import AppScheduler

log = logging.getLogger("tapebot")

#: How long the chats wait at start for the model SDK's warm-up (`App.warm_sdks`) before opening
#: anyway (a first reply then finishes it).
WARM_WAIT_S = 20.0


def log_model_switch(failed: str, next_model: str, why: str) -> None:
    """The model chain's `on_switch`: a same-model retry (failed == next) is not a switch."""
    if failed == next_model:
        log.warning("model %s failed (%s); retrying it once", failed, why)
    else:
        log.warning("model %s failed (%s); using %s", failed, why, next_model)


class App:
    """The composition root: builds every part from `Settings`, hands each part only what it
    needs, and owns their lifecycles (`spawn`, `on_stop`, `stop`). Every part a turn needs (the
    database, the stores, background tasks, MCP, skills, schedules, market data, memory, the tools
    and the runtime) is built complete in `__init__`, without I/O: the database's engine and the
    model clients connect on first use, and `start` opens the database and the MCP servers. What
    exists only in some modes is built by `start`, as it is asked to run: the gateway and chats,
    the scheduler, the live-price alerts. Its methods are the steps that build a part and keep
    it: one class, so the order of construction and of shutdown reads top to bottom in one place."""

    brief_runner: BriefRunner | None = None  # the scheduler's, once it is built

    def __init__(
        self,
        settings: Settings,
        *,
        model_factory: Callable[[str | None], ModelClient] | None = None,
        adapter_options: dict[str, dict[str, Any]] | None = None,
    ):
        self.settings = settings
        # extra constructor arguments per platform (tests pass fake transports here)
        self.adapter_options = adapter_options or {}
        self.replica_id = new_replica_id()  # this process among the replicas on one database
        self.redactor = Redactor(settings.secret_values())
        self.trace_writer = BackgroundWriter()
        self._traces_dir: str | None = None
        self._dynamic_snapshot: Callable[..., Awaitable[str]] | None = None
        self._model_factory = model_factory
        self._clients: dict[str, ModelClient] = {}
        self._umask: int | None = None  # the process umask before start, given back on stop
        self._uninstall_redaction: Callable[[], None] | None = None
        self._tasks: set[asyncio.Task[Any]] = set()
        self._stoppers: list[Callable[[], Any]] = []
        self._before_open: Callable[[], None] | None = None
        # told about each finished background task (the gateway's notices, the terminal)
        self.task_listeners: list[Callable[[TaskRecord], Awaitable[None]]] = []
        # Built here, complete (no I/O: `start` opens them). Imported here rather than at the top
        # so that importing this module stays cheap for what only needs a part of it.
        from agent import SkillLibrary, TaskManager, TaskTracker
        from agent.background_tools import BackgroundSubmitter
        from agent.mcp_client import McpManager
        from memory.tasks import SqlTaskStore
        from scheduler.service import ScheduleService
        from scheduler.store import ScheduleStore

        self.db = Database(settings.db_url)
        self.store = SqlStore(self.db, redact=self.redactor.text)
        # background tasks, and the tools' door to them
        self.task_manager = TaskManager(
            SqlTaskStore(self.db), on_complete=self._task_finished, redact=self.redactor.text
        )
        self._background = BackgroundSubmitter(self.task_manager)
        self.mcp = McpManager(
            settings.mcp_servers,
            environ=settings.environ,
            log_dir=settings.home / "logs",
            results_dir=settings.results_dir,
        )
        self.tracker = TaskTracker()  # memory upkeep in flight, drained on stop
        self.skills = SkillLibrary(settings.skills_dir)
        self.links = LinkStore(self.db)  # linked identities: one account, one book
        # briefs' schedules (the tools and /brief)
        self.schedules = ScheduleService(ScheduleStore(self.db), default_timezone=settings.scheduler.timezone)
        # What a turn runs on, likewise complete: the tools find their services in `deps`; market
        # data and memory keep the database's session factory, which `start` binds when it opens.
        self.deps = Deps()
        self.deps.add(self.links, as_type=AccountDirectory)  # the runtime finds a turn's account
        self.deps.add(self.task_manager)
        self.deps.add(self.skills)
        self.deps.add(self.schedules)
        self.policy: LocalToolPolicy = local_policy(settings, redactor=self.redactor)  # local tools' limits
        self.deps.add(self.policy)
        self.market = self._build_market()  # market data, portfolio, trading
        self.memory_hooks: MemoryContextHooks | None = None  # None when [memory] is off
        self.memory: MemoryServices | None = None  # the memory tools' services, likewise
        hooks = self._build_memory()
        # the MCP servers' tools join at `start`, once the servers have said what they serve
        self.tools = self._build_toolset()
        self._track_changing_tools()
        self._wire_subagents(self.tools)
        self.runtime = self._build_runtime(hooks)
        # Parts that exist only in some modes, decided by how `start` is asked to run: the router
        # and its adapters with chats (`tapebot run`, the console), the scheduler with `[scheduler]
        # enabled` and chats, the live-price alerts with chats and a live provider.
        self.gateway: Gateway | None = None
        self.adapters: list[ChatAdapter] = []
        self.scheduler: AppScheduler | None = None
        self.intraday_poll: IntradayAlertPoll | None = None

    # ---- models ------------------------------------------------------------------------------
    @property
    def default_model_id(self) -> str:
        return self.settings.agent.model

    def model_ids(self) -> list[str]:
        return [m.id for m in self.settings.models]

    def context_window(self, model_id: str | None) -> int:
        return self.model_for(model_id).info.context_window

    def model_for(self, model_id: str | None) -> ModelClient:
        """The client chain for a model id (default: the agent's), built once and kept."""
        if self._model_factory is not None:
            return self._model_factory(model_id)
        model_id = model_id or self.settings.agent.model
        cached = self._clients.get(model_id)
        if cached is not None:
            return cached
        from agent.providers import build_model_chain

        s = self.settings
        ids = [model_id, *(f for f in s.agent.fallbacks if f != model_id)]
        client: ModelClient = build_model_chain(  # type: ignore[assignment]
            [s.model(i) for i in ids],
            idle_timeout=s.agent.stream_idle_timeout,
            on_switch=log_model_switch,
        )
        self._clients[model_id] = client
        return client

    # ---- tools, market data, memory, the runtime ------------------------------------------------
    def _build_toolset(self) -> Toolset:
        """Every built-in tool: local files and shell, market data and trading, memory, background
        tasks, schedules, skills and sub-agents (their services are in `deps`)."""
        from agent.background_tools import background_tools
        from agent.skills import skill_tools
        from agent.subagents import subagent_tools
        from markets.tools import market_tools
        from scheduler.tools import schedule_tools

        return Toolset.combine(
            "tapebot",
            core_tools,
            local_tools,
            market_tools,
            self._memory_tools(),
            background_tools,
            schedule_tools,
            skill_tools,
            subagent_tools,
        )

    def _build_market(self) -> MarketServices:
        """Market data, the Wyckoff engine, screening, backtests, portfolio and paper trading."""
        from bot.parts import build_market

        model = self.model_for(None) if self.settings.models else None
        market = build_market(self.settings, self.db.sessions, model)
        self.deps.add(market)
        return market

    def _build_memory(self) -> CompactingHooks:
        """Long-term memory, recall, TaskState and compaction as `memory_hooks`; when
        memory is off, compaction only (and `memory_hooks` stays None)."""
        from agent import CompactingHooks
        from memory.hooks import build_memory_hooks

        s = self.settings
        model = self.model_for(s.memory.model) if s.models else None
        if not s.memory.enabled:
            from agent.compaction import Compactor
            from memory.archive import FileArchiveStore

            return CompactingHooks(Compactor(archive=FileArchiveStore(s.archive_dir)))
        hooks = build_memory_hooks(
            self.db,
            archive_dir=s.archive_dir,
            tracker=self.tracker,
            memory_client=model,
            # late-bound: the stock directory loads on the first recall, not at start-up
            code_resolver=self._mentions,
            recall_budget_chars=s.memory.recall_budget_chars,
            meter=self._record_side_call,
        )
        self.memory_hooks = hooks
        return hooks

    async def _drain_upkeep(self) -> None:
        """Memory extraction and TaskState updates in flight finish (up to the deadline) instead
        of being lost."""
        s = self.settings
        if not await self.tracker.drain(s.memory.upkeep_drain_s):
            log.warning("memory upkeep still running after %.0f s; cancelled", s.memory.upkeep_drain_s)
        await self.tracker.aclose()

    async def _record_side_call(self, record: UsageRecord) -> None:
        """A memory side call's usage, stored with the turns' (`tapebot usage` reports it apart)."""
        await self.store.record_usage(record)

    def _mentions(self, text: str) -> list[str]:
        from markets.directory import Directory

        if not Directory.may_mention(text):
            return []  # nothing to look up: the directory (and the market data) stay unloaded
        return list(self.market.data.directory.mentions(text))

    def _memory_tools(self) -> Toolset:
        from bot.parts import memory_services
        from memory.tools import memory_tools

        if self.memory_hooks is None:
            return Toolset("memory")
        self.memory = memory_services(self.memory_hooks, self.market)
        self.deps.add(self.memory)
        return memory_tools

    def _track_changing_tools(self) -> None:
        """A turn that ran one of the tools that write (a trade, a schedule…) changed what
        TaskState holds: memory is told which they are."""
        if self.memory_hooks is not None:
            self.memory_hooks.changing_tools = frozenset(
                spec.name for spec in self.tools.specs() if spec.side_effect != "read_only"
            )

    def _build_runtime(self, hooks: CompactingHooks) -> AgentRuntime:
        s = self.settings
        return AgentRuntime(
            model_for=self.model_for,
            tools=self.tools,
            store=self.store,
            gate=ApprovalGate(
                self.store,
                ttl=timedelta(minutes=s.agent.approval_ttl_minutes),
                standing_ttl=timedelta(hours=s.agent.standing_approval_hours),
                live_trading=lambda: s.markets.live,
            ),
            config=RuntimeConfig(
                max_tool_rounds=s.agent.max_tool_rounds,
                system_prompt=s.agent.system_prompt or RuntimeConfig().system_prompt,
            ),
            deps=self.deps,
            workspace=s.workspace_dir,
            results_dir=s.results_dir,
            spill_chars=s.agent.tool_result_spill_chars,
            hooks=hooks,
            snapshot=self._snapshot,
            background=self._background,
            trace_factory=self._trace,
            redactor=self.redactor,
        )

    async def _snapshot(self, turn: TurnRecord, text: str) -> str:
        """DynamicSnapshots: fresh account facts before a turn about holdings, cash, strategies or
        traders — given to the model for this turn, never stored as memory."""
        if self._dynamic_snapshot is None:  # imported once, not looked up again every turn
            from markets.snapshots import dynamic_snapshot

            self._dynamic_snapshot = dynamic_snapshot
        return await self._dynamic_snapshot(self.market, turn.requester or "default", text)

    # ---- lifecycle ---------------------------------------------------------------------------
    async def start(
        self,
        *,
        adapters: bool | Sequence[ChatAdapter] = True,
        scheduler: bool | None = None,
        before_open: Callable[[], None] | None = None,
    ) -> None:
        """Build and start everything. `adapters`: True starts Telegram/Discord as configured
        (tapebot run), a list starts the gateway with those (tapebot chat: the console);
        `scheduler` defaults to whether any start and only ever runs with `[scheduler] enabled`.
        `before_open` runs once everything is built, just before the chats start receiving
        (`run_bot` settles the heap there, so no message waits behind that collection)."""
        s = self.settings
        # Everything the bot writes under TAPEBOT_HOME is private whatever the umask; given
        # back on stop.
        if self._umask is None:
            self._umask = private_umask()
        s.ensure_dirs()
        warming = self.warm_sdks() if adapters else None
        self._uninstall_redaction = install_log_redaction(self.redactor)
        for loose in loose_modes(s.home):
            log.warning("%s", loose)
        await self.db.start()  # applies migrations
        self._log_tools()
        self.on_stop(self.task_manager.shutdown)
        await self._start_mcp()
        self.on_stop(self._drain_upkeep)
        self._before_open = before_open
        run_scheduler = (bool(adapters) if scheduler is None else scheduler) and s.scheduler.enabled
        # prepared before the chats open (its start-up is not paid by the first message), opened
        # after: no brief fires before the chats can deliver it
        jobs = self._build_scheduler() if run_scheduler else None
        try:
            if jobs is not None:
                await jobs.prepare()
            if adapters:
                if warming is not None:
                    # the chats open once the model client is ready: the first reply then costs
                    # what the later ones do (the warm-up ran alongside everything above)
                    await asyncio.wait([warming], timeout=WARM_WAIT_S)
                self.warm_caches()  # while the chats open; never waited for
                await self._start_chat(None if adapters is True else list(adapters))
            else:
                self.opening()
        except BaseException:
            if jobs is not None:  # its stopper is registered below (it must run before the chats')
                with contextlib.suppress(Exception):  # the first failure is the one reported
                    await jobs.stop()
            raise
        if jobs is not None:
            self.on_stop(jobs.stop)  # after the chats' stoppers: stopped first, while they deliver
            jobs.open()
            if adapters:
                await self.schedules.take_up_kept()  # /brief now acknowledged before a crash
        # tasks that finished (or were lost) while we were down are reported now, into the chat;
        # without chats (a one-shot turn) nobody could be told: they wait for `tapebot run`
        await self.task_manager.start(notify=bool(adapters))

    def warm_sdks(self) -> asyncio.Task[Any] | None:
        """Warm the configured models' SDKs in a worker thread while the rest starts, so the first
        reply pays none of it. Tracked: `stop` cancels the wait."""
        from bot.parts import sdk_warmer

        if self._model_factory is not None:
            return None
        warm = sdk_warmer(self.settings, self.model_for)
        return self.spawn(asyncio.to_thread(warm), name="warm-sdks") if warm is not None else None

    def warm_caches(self) -> asyncio.Task[Any]:
        """Build in the background what a first reply would build on first use: the chats'
        statements, the trace writer (bot/parts.py `cache_warmer`). Tracked: `stop` cancels it."""
        from bot.parts import cache_warmer

        warm = cache_warmer(self.store, self.trace_writer)
        return self.spawn(warm(), name="warm-caches")

    async def trade_facts(self, record: ApprovalRecord) -> TradePreview | None:
        """The facts a trade's approval card shows (markets/preview.py); None for other tools."""
        if record.tool != "execute_trade":
            return None
        from markets.preview import trade_preview

        return await trade_preview(self.market, record.requester or "default", record.arguments)

    def _trace(self, turn_id: str, session_id: str) -> Scratchpad:
        if self._traces_dir is None:  # a str, once: a Path per turn is measurable at 200 chats
            self._traces_dir = str(self.settings.traces_dir)
        return Scratchpad(self._traces_dir, turn_id, session_id, self.redactor, writer=self.trace_writer)

    # ---- background tasks, scheduler, skills, sub-agents, MCP (issues 5 and 7) ---------------
    async def _task_finished(self, record: TaskRecord) -> None:
        """A background task ended: wake a turn in its chat that reports the result (queued behind
        a running turn, never mixed into the user's message). Delivered once (the ledger claims it).
        Without chats (a one-shot turn) nobody could be told: it waits for `tapebot run`."""
        if not self.task_listeners:
            raise NoticeDeferred(f"no chat is open here for {record.chat_key}")
        for notify in self.task_listeners:
            await notify(record)

    async def _start_mcp(self) -> None:
        """Connect the MCP servers and add their tools to the runtime's (kept up to date when a
        server's list changes). A server that fails is reported in /status; the bot starts anyway."""
        mcp = self.mcp
        await mcp.start()
        self.on_stop(mcp.stop)
        for tool in mcp.toolset:
            self.tools.add(tool)  # a name a built-in tool has is refused, as at build
        mcp.publish_into(self.tools)
        if len(mcp.toolset):
            self._track_changing_tools()

    def _log_tools(self) -> None:
        """What the operator should know about the tools: how exec_command runs (it probes the
        sandbox), and the skills that were skipped."""
        from agent.tools import sandbox

        mode = sandbox.mode(self.policy)
        (log.info if mode.startswith("sandboxed") else log.warning)(
            "exec_command: %s", sandbox.describe(self.policy)
        )
        for problem in self.skills.problems:
            log.warning("skill skipped: %s", problem)

    def _wire_subagents(self, tools: Toolset) -> None:
        from agent.subagents import SubAgentServices

        s = self.settings
        self.deps.add(
            SubAgentServices(
                model_for=self.model_for,
                toolset=tools,
                workspace=s.workspace_dir,
                results_dir=s.results_dir,
                background=self._background,
                trace_factory=self._trace,
            )
        )

    def system_dynamic(self) -> str:
        """The stable per-deployment part after the static prompt: the skills list."""
        from agent.skills import skills_prompt

        return skills_prompt(self.skills.skills)

    def opening(self) -> None:
        """Everything is built; the chats are about to start receiving (bot/chat_setup.py)."""
        before, self._before_open = self._before_open, None
        if before is not None:
            before()

    def _build_scheduler(self) -> AppScheduler:
        from bot.briefs import BriefRunner
        from markets.calendar import TradingCalendar
        from scheduler.app_scheduler import AppScheduler

        s = self.settings
        schedules = self.schedules
        # the chats open after the scheduler is built: they take the briefs then (`_start_chat`)
        runner = self.brief_runner = BriefRunner(
            skill=self.skills.get,
            calendar_warning=self.market.calendar_warning,
        )
        housekeeping = housekeeping_jobs(self.task_manager, self.memory, self.market)
        housekeeping.update(market_refresh_jobs(self.market, self._deliver_alerts))
        jobs = AppScheduler(
            schedules.store,
            on_brief=runner.run,
            is_trading_day=warned_trading_days(TradingCalendar.sse(s.home / "data")),
            housekeeping=housekeeping,
            housekeeping_times=REFRESH_TIMES,
            default_timezone=s.scheduler.timezone,
            owner_id=self.replica_id,
            lease_ttl=s.scheduler.lease_ttl_s,
            brief_grace_time=s.scheduler.misfire_grace_s,
            traces_dir=s.traces_dir,
            trace_retention_days=s.scheduler.trace_retention_days,
        )
        schedules.scheduler = jobs  # ScheduleService (scheduler/) is built before it, for the tools
        self.scheduler = jobs
        return jobs

    async def _alert_loop(self, every: float = 60.0) -> None:
        """What fired while we were down, then every minute what another process recorded
        (`tapebot data update`, a replica's refresh): one indexed query when nothing waits."""
        while True:
            try:
                await self._deliver_alerts()
            except Exception:  # a database hiccup: the next round tries again
                log.exception("delivering alerts failed")
            await asyncio.sleep(every)

    async def _deliver_alerts(self) -> int:
        """Alert firings waiting for delivery into the chats this process serves."""
        if self.gateway is None:  # no chat here to deliver into: they wait for one
            return 0
        from bot.alert_delivery import AlertDelivery
        from markets.alerts import AlertStore

        delivery = AlertDelivery(
            AlertStore(self.market.sessions()), self.market, self.gateway.chats, self.gateway.adapters
        )
        return await delivery.deliver_pending()

    async def _start_chat(self, adapters: list[ChatAdapter] | None = None) -> None:
        """The gateway and the chat adapters (`adapters`: given ones; None: as configured)."""
        from bot.chat_setup import build_gateway, open_chats

        parts = self._chat_parts()
        gateway = build_gateway(parts, terminal=any(a.platform == "terminal" for a in adapters or ()))
        self.gateway = gateway  # before the adapters start: briefs and the console reach it
        self.task_listeners.append(gateway.notices.notify_task)
        self.on_stop(self.task_manager.subscribe(gateway.notices.task_progress))
        from bot.briefs import KeptBriefs

        self.schedules.kept = KeptBriefs(self.store, gateway.output)  # /brief now is kept until it has run
        if self.brief_runner is not None:
            self.brief_runner.deliver_to(gateway.briefs)
        self.adapters = await open_chats(gateway, parts, adapters)
        self.spawn(self._alert_loop(), "alerts")
        self._start_intraday_poll()

    def _start_intraday_poll(self) -> None:
        """Live-price alerts in trading hours, when a live provider is configured."""
        from bot.alert_delivery import AlertDelivery
        from bot.alert_poll import IntradayAlertPoll, polls
        from markets.alerts import AlertStore

        if self.gateway is None or not polls(self.market):
            return
        delivery = AlertDelivery(
            AlertStore(self.market.sessions()), self.market, self.gateway.chats, self.gateway.adapters
        )
        self.intraday_poll = IntradayAlertPoll(self.market, delivery, leader=self.scheduler)
        self.spawn(self.intraday_poll.run(self.market.settings.alert_poll_s), "alerts-live")

    def _chat_parts(self) -> ChatParts:
        """What the chats are built from: each part of the App they use, and nothing else."""
        from bot.cards import exec_note
        from bot.chat_setup import ChatParts
        from bot.commands.background import StatusExtras, skill_commands
        from bot.commands.context import CommandServices
        from bot.waiting import CardFacts

        notes: dict[str, Callable[[str], str]] = {}
        policy = self.policy
        notes["exec_command"] = lambda lang: exec_note(policy, lang)
        services = CommandServices(
            self.runtime,
            self.store,
            self.model_ids(),
            self.default_model_id,
            self.context_window,
            memory=self.memory,
            tasks=self.task_manager,
            schedules=self.schedules,
            skills=self.skills,
            alerts=alert_ops(self.market),
            links=self.links,
            status_extra=StatusExtras(
                self.market.calendar_warning,
                self.task_manager,
                self.schedules,
                self.mcp.status,
                data_dates=market_data_status(self.market),
            ),
        )
        return ChatParts(
            settings=self.settings,
            runtime=self.runtime,
            store=self.store,
            services=services,
            spawn=self.spawn,
            on_stop=self.on_stop,
            skill_commands=skill_commands(self.skills),
            card_facts=CardFacts(self.trade_facts, notes, self.schedules.chat_timezone),
            system_dynamic=self.system_dynamic(),
            redact=self.redactor.text,
            adapter_options=self.adapter_options,
            opening=self.opening,
            replica_id=self.replica_id,
            brief_line=partial(brief_data_line, self.market),
        )

    def spawn(self, coro: Any, name: str = "") -> asyncio.Task[Any]:
        task = asyncio.create_task(coro, name=name or None)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    def on_stop(self, fn: Callable[[], Any]) -> None:
        self._stoppers.append(fn)

    async def stop(self) -> None:
        for fn in reversed(self._stoppers):
            try:
                result = fn()
                if asyncio.iscoroutine(result):
                    await result
            except Exception:
                log.exception("error while stopping")
        self._stoppers.clear()
        for task in list(self._tasks):
            task.cancel()
        if self._tasks:
            await asyncio.gather(*self._tasks, return_exceptions=True)
        for client in self._clients.values():
            try:
                await client.aclose()
            except Exception:
                log.debug("closing a model client failed", exc_info=True)
        self._clients.clear()
        await asyncio.to_thread(self.trace_writer.close)  # every ended turn's trace is on disk
        await self.db.close()
        if self._uninstall_redaction is not None:
            self._uninstall_redaction()
            self._uninstall_redaction = None
        if self._umask is not None:
            os.umask(self._umask)
            self._umask = None
