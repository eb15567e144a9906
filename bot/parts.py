"""Builders of the App's parts, each a function of the settings and the parts it needs (bot/app.py
calls them in order and owns what they return)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import platform
from collections.abc import Awaitable, Callable
from datetime import UTC, date, datetime
from typing import TYPE_CHECKING, Any, cast

from agent import Redactor
from agent.tools.workspace import LocalToolPolicy
from config.settings import Settings

if TYPE_CHECKING:
    from agent import ModelClient, TaskManager
    from agent.scratchpad import BackgroundWriter
    from agent.tools.registry import ToolContext
    from markets.alerts import AlertStore
    from markets.calendar import TradingCalendar
    from markets.data import MarketData
    from markets.models import SessionFactory
    from markets.portfolio import Portfolio
    from markets.services import MarketServices, MarketSettings
    from memory.hooks import MemoryContextHooks
    from memory.stores import SqlStore
    from memory.tools import MemoryServices

log = logging.getLogger("tapebot")


def local_policy(s: Settings, redactor: Redactor | None = None) -> LocalToolPolicy:
    """The built-in local tools' policy from `[tools]` (workspace, limits, the shell's sandbox)."""
    return LocalToolPolicy.for_home(
        s.home,
        exec_timeout=s.tools.exec_timeout,
        exec_output_cap=s.tools.exec_output_cap,
        env_allowlist=list(s.tools.env_allowlist),
        web_max_bytes=s.tools.web_fetch_max_bytes,
        web_timeout=s.tools.web_fetch_timeout,
        allow_private_urls=s.tools.allow_private_urls,
        unsandboxed_exec=s.tools.unsandboxed_exec,
        exec_network=s.tools.exec_network,
        exec_memory_mb=s.tools.exec_memory_mb,
        exec_file_size_mb=s.tools.exec_file_size_mb,
        exec_max_processes=s.tools.exec_max_processes,
        exec_disk_mb=s.tools.exec_disk_mb,
        exec_read_only_paths=list(s.tools.exec_read_only_paths),
        secret_values=s.secret_values(),
        redactor=redactor,
    )


def warned_trading_days(cal: TradingCalendar) -> Callable[[date], bool]:
    """The calendar's is_trading_day for the scheduler, logging when a day lies outside the known
    range (the day is then a weekday guess; briefs and /status say so too)."""

    def is_trading_day(day: date) -> bool:
        if warn := cal.warning(day, horizon=0):
            log.warning("trading_days schedule: %s", warn)
        return bool(cal.is_trading_day(day))

    return is_trading_day


def market_settings(s: Settings) -> MarketSettings:
    """The `[markets]` config as the market services read it (also for `tapebot data update`)."""
    from markets.services import MarketSettings

    env = s.environ
    providers: list[str] = (
        [s.markets.provider] if s.markets.provider == "bundled" else [s.markets.provider, "bundled"]
    )
    return MarketSettings(
        initial_cash_cn=s.markets.initial_cash,
        retry_blocked=s.markets.retry_blocked,
        alert_poll_s=s.markets.alert_poll_s,
        live=s.markets.live,
        live_exchange=s.markets.live_exchange,
        live_api_key=env.get(s.markets.live_api_key_env, "") if s.markets.live else "",
        live_secret=env.get(s.markets.live_secret_env, "") if s.markets.live else "",
        csv_folder=str(s.markets.csv_dir or ""),
        providers=providers,
        data_dir=str(s.home / "data"),
    )


def build_market(s: Settings, sessions: SessionFactory, model: ModelClient | None) -> MarketServices:
    """Market data, the Wyckoff engine, screening, backtests, portfolio and paper trading: their
    services (the tools find them in the Deps). The data loads on first use."""
    from markets.services import (
        LazyMarketData,
        MarketServices,
        build_live_broker,
        build_market_data,
    )

    ms = market_settings(s)
    built: list[MarketServices] = []  # the bar store keeps the services' clock (tests inject one)

    def clock() -> datetime:
        return built[0].now() if built else datetime.now(UTC)

    # built on first use: a turn that runs no market tool imports no numpy
    lazy_data = LazyMarketData(lambda: build_market_data(ms, sessions, clock=clock))
    data = cast("MarketData", lazy_data)  # the stand-in answers as a MarketData does
    live = build_live_broker(ms, sessions, lazy_data.get()) if ms.live else None
    if ms.live:
        log.warning("=" * 64)
        log.warning("LIVE TRADING IS ENABLED on %s: approved trades send real orders", ms.live_exchange)
        log.warning("=" * 64)
    services = MarketServices(
        data=data,
        session_factory=sessions,
        results_dir=s.results_dir,
        charts_dir=s.results_dir / "charts",
        settings=ms,
        model=model,
        live_broker=live,
    )
    built.append(services)
    return services


def memory_services(hooks: MemoryContextHooks, market: MarketServices | None) -> MemoryServices:
    """What the memory tools use: the recall store, the archive, the extractor, and the portfolio's
    analyses and trades as history sources when the markets are on."""
    from memory.tools import HistorySource, MemoryServices

    recall = hooks.recaller
    sources: dict[str, HistorySource] = {}
    if market is not None:
        live = market

        def portfolio() -> Portfolio:
            from markets.portfolio import Portfolio  # on use: numpy loads with the first market call

            return Portfolio(live.sessions(), live.data, live.settings)

        async def analyses(ctx: ToolContext, query: str, limit: int) -> Any:
            return await portfolio().records(ctx.book, symbol=query or None, limit=limit)

        async def trades(ctx: ToolContext, query: str, limit: int) -> Any:
            return await portfolio().trades(ctx.book, symbol=query or None, limit=limit)

        sources = {"analyses": analyses, "trades": trades}
    return MemoryServices(
        store=recall.store,
        recall=recall,
        archive=recall.archive,
        extractor=hooks.extractor,
        scope_of=hooks.scope_of,
        history_sources=sources,
    )


def sdk_warmer(s: Settings, model_for: Callable[[str | None], ModelClient]) -> Callable[[], None] | None:
    """What warms the configured models' SDKs, to run in a worker thread: import them, build their
    clients and load what a first call loads (None when no SDK is configured)."""
    from agent.providers import import_sdks, sdk_modules

    wanted = {s.agent.model, *s.agent.fallbacks, s.memory.model or s.agent.model}
    names = sdk_modules([m for m in s.models if m.id in wanted])
    if not names:
        return None
    clients = model_clients(s, model_for)

    def warm() -> None:
        from agent.tokens import estimate_tokens

        estimate_tokens("预热 warm-up")  # its character tables are built on first use (~30 ms)
        import_sdks(names)
        # The SDKs' first request names the OS in a header; the standard library caches both
        # answers (`platform.platform` scans the interpreter's binary for its libc version:
        # ~4-6 ms of CPU a first reply paid).
        platform.platform()
        with contextlib.suppress(OSError):
            platform.freedesktop_os_release()
        for client in clients:
            try:
                getattr(client, "warm", lambda: None)()
            except Exception:
                log.debug("warming the %s client failed", client.info.id, exc_info=True)

    return warm


#: The chat key the start-up's rehearsal of a chat's first read uses (no chat has it).
REHEARSAL_CHAT = "rehearsal:"


async def rehearse_chat_rows(store: SqlStore) -> None:
    """What a chat's first message does to the `chats` table once per process: read its row
    (absent here), which builds the row's statements and value conversions (the write then runs
    them as they are; a rehearsed write would have to be rolled back, and buys nothing more).
    And its session's open turn (none): builds the store's plain-SQL value conversions, which
    every turn's reads and writes use."""
    await store.load_chat(REHEARSAL_CHAT)
    await store.open_turn(REHEARSAL_CHAT)


def cache_warmer(store: SqlStore | None, traces: BackgroundWriter) -> Callable[[], Awaitable[None]]:
    """What a first reply would otherwise build on first use, warmed on the event loop
    once the SDKs are imported, while the chats open: the
    `chats` statements and the store's value conversions a chat's first message uses, the trace
    writer's thread, the per-turn account-snapshot module. Each step is best-effort: a failure costs only
    the warmth."""

    async def warm() -> None:
        traces.start()
        from sqlalchemy.orm import configure_mappers

        import markets.snapshots  # noqa: F401 - imported by every turn's snapshot check

        # The first statement run through a session (a read) would configure every mapper: ~10 ms
        configure_mappers()

        if store is not None:
            try:
                await rehearse_chat_rows(store)
            except Exception:
                log.debug("rehearsing the chats statements failed", exc_info=True)

    return warm


def model_clients(s: Settings, model_for: Callable[[str | None], ModelClient]) -> list[ModelClient]:
    """The vendor clients behind the agent's and the memory's model chains (each once)."""
    from config.errors import TapebotError

    try:
        chains = [model_for(i) for i in dict.fromkeys([s.agent.model, s.memory.model or s.agent.model])]
    except TapebotError:  # reported by the start itself, where the model is first needed
        return []
    return list({id(c): c for chain in chains for c in getattr(chain, "clients", [chain])}.values())


def housekeeping_jobs(
    tasks: TaskManager, memory: MemoryServices | None, market: MarketServices | None
) -> dict[str, Callable[[], Awaitable[Any]]]:
    """The scheduler's daily jobs: old task records, expired memories, and one step of each running
    trader after the previous session's close."""
    jobs: dict[str, Callable[[], Awaitable[Any]]] = {"cleanup_tasks": tasks.cleanup}
    if memory is not None:
        jobs["prune_memory"] = memory.store.prune
    if market is not None:
        live = market

        async def run_traders() -> None:
            from markets.strategies import run_all_traders  # with numpy: not at start

            await run_all_traders(live)

        jobs["run_traders"] = run_traders
    return jobs


def market_data_status(market: MarketServices) -> Callable[[str, datetime | None], Awaitable[str | None]]:
    """/status's market-data line: each market's newest bar with its age, and the providers. The
    dates are read in a worker thread (the first call loads the data)."""

    async def line(lang: str, now: datetime | None = None) -> str | None:
        from bot.i18n import t
        from markets.toolset import data_dates

        when = now or market.now()
        try:
            dates = await asyncio.to_thread(data_dates, market, when, lang)
        except Exception as exc:  # noqa: BLE001 — /status reports what it can; the data's error is shown
            return t(lang, "status_data", dates=f"⚠️ {type(exc).__name__}: {exc}", source="")
        names = "+".join(p.name for p in market.data.providers)
        return t(lang, "status_data", dates=dates, source=names)

    return line


def market_refresh_jobs(
    market: MarketServices, deliver: Callable[[], Awaitable[int]] | None
) -> dict[str, Callable[[], Awaitable[Any]]]:
    """The data refreshes after each market's close (bot/app.py times them): newest bars into the
    local store, then the alerts checked against them, waiting paper orders retried, and what
    fired delivered into its chat."""

    def job(m: str) -> Callable[[], Awaitable[Any]]:
        async def refresh() -> str:
            from markets.alerts import AlertStore, evaluate_alerts
            from markets.broker import PaperBroker
            from markets.refresh import refresh_market

            data = cast("MarketData", getattr(market.data, "get", lambda: market.data)())
            report = await asyncio.to_thread(refresh_market, data, m)
            fired = await evaluate_alerts(AlertStore(market.sessions()), data, [m])
            updates = await PaperBroker(
                market.sessions(), data, market.settings, clock=market.clock
            ).retry_waiting()
            sent = await deliver() if deliver is not None else 0
            return f"{report.summary()}; {len(fired)} alert(s) fired, {sent} delivered; {len(updates)} order(s) retried"

        return refresh

    return {"refresh_cn": job("cn"), "refresh_crypto": job("crypto")}


# After each market's close: A-shares close 15:00 Beijing (bars settle by ~15:30); crypto's daily
# candle closes 00:00 UTC.
REFRESH_TIMES = {"refresh_cn": ("15:40", "Asia/Shanghai"), "refresh_crypto": ("00:10", "UTC")}


def alert_ops(market: MarketServices | None) -> AlertStore | None:
    """The alerts /alerts lists and removes (None without the market tools or the database)."""
    if market is None or market.session_factory is None:
        return None
    from markets.alerts import AlertStore

    return AlertStore(market.session_factory)


async def brief_data_line(market: MarketServices, lang: str, now: datetime | None = None) -> str:
    """The brief's first line: the market data's date and age, and a warning when it is not today's."""
    from bot.i18n import t
    from markets.toolset import age_days, data_dates

    when = now or market.now()
    dates = await asyncio.to_thread(data_dates, market, when, lang)
    ages = [a for m in ("cn",) if (a := age_days(market.data.as_of(m), when)) is not None]
    return t(lang, "data_stale" if any(a > 3 for a in ages) else "data_line", dates=dates)
