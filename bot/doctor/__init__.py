"""`tapebot doctor`: everything that must work before the first real message, checked in one go.

Each check is one line: ✓ (works), ! (works, but look at this) or ✗ (will fail), and every ! and ✗
carries the fix. The exit status is 1 when any check is ✗. Network checks make the smallest call
that proves the point (a 16-token model reply, Telegram getMe/getWebhookInfo, Discord /users/@me and
the application's intent flags) and never print a secret, not even in an error message.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Sequence
from datetime import date, datetime
from zoneinfo import ZoneInfo

from bot.doctor.check import Check, exit_code, render
from bot.doctor.local import check_calendar, check_data, check_database, check_file_modes, check_sandbox
from bot.doctor.remote import check_discord, check_models, check_telegram
from config.settings import Settings

__all__ = [
    "Check",
    "check_calendar",
    "check_data",
    "check_database",
    "check_discord",
    "check_file_modes",
    "check_models",
    "check_sandbox",
    "check_telegram",
    "exit_code",
    "render",
    "run_checks",
]


async def run_checks(settings: Settings, *, today: date | None = None) -> list[Check]:
    """All checks, in a fixed order; the network ones run concurrently."""
    if today is None:
        today = datetime.now(ZoneInfo(settings.scheduler.timezone)).date()
    secrets = settings.secret_values()
    network: list[Awaitable[list[Check]]] = [check_models(settings)]
    network.append(check_telegram(settings))
    network.append(check_discord(settings))
    results = await asyncio.gather(*(_guard(n, secrets) for n in network))
    checks = [c for group in results for c in group]
    checks.append(await check_database(settings))
    checks.append(check_calendar(today, settings.home / "data"))
    checks.extend(check_data(settings, today))
    checks.append(check_file_modes(settings))
    checks.append(check_sandbox(settings))
    return [_scrub(c, secrets) for c in checks]


async def _guard(coro: Awaitable[list[Check]], secrets: Sequence[str]) -> list[Check]:
    try:
        return await coro
    except Exception as exc:  # noqa: BLE001 — a check that crashed is a failed check, not a crashed doctor
        return [
            Check("doctor", "fail", f"a check crashed: {type(exc).__name__}: {exc}", "rerun with --debug")
        ]


def _scrub(check: Check, secrets: Sequence[str]) -> Check:
    detail, fix = check.detail, check.fix
    for s in secrets:
        detail, fix = detail.replace(s, "***"), fix.replace(s, "***")
    return Check(check.name, check.status, " ".join(detail.split()), fix)
