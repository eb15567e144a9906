"""The checks of this machine: database migrations, the trading calendar's coverage, the data's
as-of dates, private file modes and the shell sandbox."""

from __future__ import annotations

import stat
from collections.abc import Callable
from datetime import date, timedelta
from pathlib import Path
from typing import Any

from bot.doctor.check import Check
from config.settings import Settings

CALENDAR_DAYS_AHEAD = 30
STALE_DATA_DAYS = 7


# ---- database --------------------------------------------------------------------------------
async def check_database(settings: Settings) -> Check:
    from memory.db import (
        alembic_config,
        check_migration_chain,
        create_engine,
        current_revision,
        sqlite_path,
    )

    url = settings.db_url
    path = sqlite_path(url)
    if path is not None and not path.exists():
        return Check("database", "ok", f"{path} does not exist yet: created and migrated at first start")
    try:
        cfg = alembic_config(url)
        head = check_migration_chain(cfg)
        engine = create_engine(url)
        try:
            current = await current_revision(engine)
        finally:
            await engine.dispose()
    except Exception as exc:  # noqa: BLE001 — any driver/connection error is the failed check
        return Check(
            "database", "fail", f"{type(exc).__name__}: {exc}", "check database_url and that the server is up"
        )
    if current == head:
        return Check("database", "ok", f"migrations current ({head})")
    from alembic.script import ScriptDirectory

    known = {r.revision for r in ScriptDirectory.from_config(cfg).walk_revisions()}
    if current is not None and current not in known:
        return Check(
            "database",
            "fail",
            f"at revision {current}, which this tapebot does not know (written by a newer version?)",
            "upgrade tapebot, or restore the backup taken before the last upgrade",
        )
    return Check(
        "database",
        "warn",
        f"at {current or 'no revision'}, this version expects {head}: migrations run at the next start",
        "back up first: tapebot db backup (then `tapebot db upgrade` or just start)",
    )


# ---- market data -----------------------------------------------------------------------------
def check_calendar(today: date, data_dir: Path | None = None) -> Check:
    from markets.calendar import TradingCalendar

    cal = TradingCalendar.sse(data_dir)
    ahead = today + timedelta(days=CALENDAR_DAYS_AHEAD)
    fix = (
        "`tapebot data update-calendar` (the akshare extra), or put a newer cn_trade_calendar.json "
        "into $TAPEBOT_HOME/data/"
    )
    source = "bundled" if cal.source == "bundled" else cal.source
    if not cal.covers(today):
        return Check(
            "trading calendar",
            "fail",
            f"the SSE calendar ({source}) ends {cal.last}; today ({today}) is outside it, so holidays are "
            "not known (weekdays are assumed trading days): trading-day briefs and traders may run on a holiday",
            fix,
        )
    if not cal.covers(ahead):
        return Check(
            "trading calendar",
            "warn",
            f"the SSE calendar ({source}) covers today but ends {cal.last}, before {ahead}: after that "
            "weekdays are assumed trading days",
            fix,
        )
    return Check(
        "trading calendar", "ok", f"SSE calendar ({source}) covers {today} … {ahead} (ends {cal.last})"
    )


def check_data(settings: Settings, today: date) -> list[Check]:
    provider = settings.markets.provider
    if provider not in ("bundled", "csv"):
        return [Check("market data", "ok", f"{provider}: fetched over the network, dated per answer")]
    from markets.providers import BundledProvider, CsvFolderProvider

    source: Any = BundledProvider()
    label = "bundled demo data"
    if provider == "csv":
        assert settings.markets.csv_dir is not None  # the settings validator requires it
        source, label = CsvFolderProvider(settings.markets.csv_dir), f"CSV bars in {settings.markets.csv_dir}"
    parts, oldest = [], None
    for market, title in (("cn", "A-shares"), ("crypto", "BTC/ETH")):
        try:
            as_of = source.as_of(market)
        except Exception:  # noqa: BLE001 — a provider that cannot say is left out of the line
            as_of = None
        if as_of is None:
            continue
        parts.append(f"{title} as of {as_of}")
        oldest = as_of if oldest is None else min(oldest, as_of)
    if not parts:
        return [Check("market data", "fail", f"{label}: no bars found", "check [markets] provider / csv_dir")]
    detail = f"{label}: " + ", ".join(parts)
    if oldest is not None and (today - oldest).days > STALE_DATA_DAYS:
        return [
            Check(
                "market data",
                "warn",
                f"{detail} — {(today - oldest).days} days old; every answer states its as-of date",
                'for current prices set [markets] provider = "akshare" / "yfinance" / "ccxt" '
                '(pip install akshare pandas: the akshare extra), or "csv" with your own bars',
            )
        ]
    return [Check("market data", "ok", detail)]


# ---- local -----------------------------------------------------------------------------------
def check_file_modes(settings: Settings) -> Check:
    from config.filemodes import loose_modes

    home = settings.home
    if not home.exists():
        return Check("file modes", "ok", f"{home} does not exist yet: created private (0700) at first start")
    loose = [str(m.path.relative_to(home)) if m.path != home else str(home) for m in loose_modes(home)]
    log_file = settings.log_file
    outside = log_file is not None and home not in log_file.parents and log_file.exists()
    if outside and log_file is not None and stat.S_IMODE(log_file.stat().st_mode) & 0o077:
        loose.append(str(log_file))
    if loose:
        return Check(
            "file modes",
            "fail",
            f"open to other users: {', '.join(loose)}",
            f"chmod 700 {home} (folders) and chmod 600 the files in it; `tapebot config check` lists each",
        )
    return Check("file modes", "ok", f"{home} and its files are private")


# The run flags that let bubblewrap mount its own /proc in a container (the engines mask parts of
# /proc, and the kernel refuses a new proc mount under masks); Docker's default seccomp and
# AppArmor profiles also refuse the user namespace bwrap makes.
CONTAINER_SANDBOX_FLAGS = (
    "run the container with --security-opt systempaths=unconfined (podman; Docker also needs "
    "--security-opt seccomp=unconfined --security-opt apparmor=unconfined); see the README's container "
    "steps"
)
HOST_SANDBOX_FIX = (
    "allow unprivileged user namespaces: sysctl kernel.unprivileged_userns_clone=1 (Debian), or on "
    "Ubuntu 24.04+ an AppArmor profile for bwrap (or kernel.apparmor_restrict_unprivileged_userns=0)"
)
INSTALL_FIX = (
    "install bubblewrap: apt-get install bubblewrap (Debian/Ubuntu), dnf install bubblewrap (Fedora)"
)


def check_sandbox(
    settings: Settings, status: Callable[[Any], Any] | None = None, *, container: bool | None = None
) -> Check:
    """What exec_command will do here: run in bubblewrap, run unconfined (opted in), or be refused
    — and, when bubblewrap is installed but cannot start, why and what lets it."""
    from agent.tools import sandbox
    from bot.parts import local_policy

    policy = local_policy(settings)
    st = (status or sandbox.status)(policy)
    if st.sandboxed:
        return Check("sandbox", "ok", f"bubblewrap works here: {sandbox.describe(policy)}")
    if not st.installed:
        fix = INSTALL_FIX
    elif sandbox.in_container() if container is None else container:
        fix = CONTAINER_SANDBOX_FLAGS
    else:
        fix = HOST_SANDBOX_FIX
    if st.allowed:
        return Check(
            "sandbox",
            "warn",
            f"{st.reason}; unsandboxed_exec = true, so shell commands run WITHOUT a sandbox",
            f"{fix}, then remove unsandboxed_exec",
        )
    return Check(
        "sandbox",
        "warn",
        f"{st.reason}: exec_command is refused (everything else works)",
        f"{fix}; or set [tools] unsandboxed_exec = true to run commands without a sandbox"
        if st.installed
        else fix,
    )
