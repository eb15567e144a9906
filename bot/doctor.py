"""`tapebot doctor`: everything that must work before the first real message, checked in one go.

Each check is one line: ✓ (works), ! (works, but look at this) or ✗ (will fail), and every ! and ✗
carries the fix. The exit status is 1 when any check is ✗. Network checks make the smallest call
that proves the point (a 16-token model reply, Telegram getMe/getWebhookInfo, Discord /users/@me and
the application's intent flags) and never print a secret, not even in an error message.
"""

from __future__ import annotations

import asyncio
import stat
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from datetime import date, datetime, timedelta
from pathlib import Path
from typing import Any, Literal
from zoneinfo import ZoneInfo

from config.settings import ModelConfig, Settings

Status = Literal["ok", "warn", "fail"]
MARK = {"ok": "✓", "warn": "!", "fail": "✗"}
NETWORK_TIMEOUT = 20.0
CALENDAR_DAYS_AHEAD = 30
STALE_DATA_DAYS = 7
# Discord application flags: the Message Content intent switched on in the developer portal
# (GATEWAY_MESSAGE_CONTENT for verified bots, _LIMITED for bots in fewer than 100 servers).
MESSAGE_CONTENT_FLAGS = (1 << 18) | (1 << 19)
DISCORD_API = "https://discord.com/api/v10"


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


# ---- model ---------------------------------------------------------------------------------------
async def check_models(settings: Settings) -> list[Check]:
    if not settings.models:
        return [
            Check(
                "model",
                "fail",
                "no model configured",
                "set ANTHROPIC_API_KEY (or OPENAI_API_KEY), or add [[models]] to config.toml",
            )
        ]
    try:
        chain = settings.model_chain()
    except Exception as exc:  # noqa: BLE001 — any config problem is reported as the failed check
        return [Check("model", "fail", str(exc), f"edit [agent] in {settings.config_path}")]
    return list(await asyncio.gather(*(check_model(settings, m) for m in chain)))


async def check_model(settings: Settings, cfg: ModelConfig) -> Check:
    from agent.errors import ModelError
    from agent.messages import Message
    from agent.providers import build_model_client
    from agent.providers.base import FinishChunk, ModelRequest, TextChunk

    name = f"model {cfg.id}"
    key = cfg.resolved_api_key(settings.environ)
    where = cfg.base_url or f"the {cfg.provider} API"
    if not key and not cfg.base_url:
        env = cfg.api_key_env or ("ANTHROPIC_API_KEY" if cfg.provider == "anthropic" else "OPENAI_API_KEY")
        return Check(name, "fail", f"{cfg.model}: no API key", f"set {env} (or api_key in [[models]])")
    client = build_model_client(cfg, idle_timeout=NETWORK_TIMEOUT)
    request = ModelRequest(messages=[Message.user("Reply with the word: ok")], max_tokens=16)
    got = ""

    async def _one_call() -> None:
        nonlocal got
        async for chunk in client.stream(request):
            if isinstance(chunk, TextChunk):
                got += chunk.text
            elif isinstance(chunk, FinishChunk):
                break

    try:
        await asyncio.wait_for(_one_call(), NETWORK_TIMEOUT * 2)
    except TimeoutError:
        return Check(
            name, "fail", f"{cfg.model} at {where}: no answer in time", "check base_url and the network"
        )
    except ModelError as exc:
        return Check(name, "fail", f"{cfg.model} at {where}: {exc}", _model_fix(str(exc), cfg))
    finally:
        try:
            await client.aclose()
        except Exception:  # noqa: BLE001 — closing after a good answer: a close error changes nothing
            pass
    return Check(name, "ok", f"{cfg.model} at {where} answered ({len(got)} chars)")


def _model_fix(text: str, cfg: ModelConfig) -> str:
    low = text.lower()
    env = cfg.api_key_env or "the API key"
    if any(w in low for w in ("401", "403", "auth", "api key", "permission")):
        return f"the key was refused: check {env} (a current key for this provider and endpoint)"
    if "404" in low or "not found" in low:
        return f"the endpoint or model name is wrong: check model = {cfg.model!r} and base_url"
    if "429" in low or "rate" in low:
        return "rate-limited or out of credit: check the account's quota"
    return "check base_url, the network, and the provider's status page"


# ---- Telegram --------------------------------------------------------------------------------
async def check_telegram(settings: Settings) -> list[Check]:
    import httpx

    tg = settings.telegram
    token = tg.resolved_token(settings.environ)
    if not tg.enabled:
        return [Check("telegram", "ok", "not enabled (no TELEGRAM_BOT_TOKEN)")]
    if not token:
        return [Check("telegram", "fail", "enabled but no token", f"set {tg.token_env} (from @BotFather)")]
    base = f"{tg.api_base_url}{token}"
    async with httpx.AsyncClient(timeout=NETWORK_TIMEOUT) as http:
        try:
            me = (await http.get(f"{base}/getMe")).json()
            if not me.get("ok"):
                return [
                    Check(
                        "telegram login",
                        "fail",
                        f"getMe refused: {me.get('description', 'unknown error')}",
                        f"the token is wrong or revoked: get it again from @BotFather (/token) into {tg.token_env}",
                    )
                ]
            info = (await http.get(f"{base}/getWebhookInfo")).json().get("result") or {}
        except (httpx.HTTPError, ValueError) as exc:
            return [
                Check(
                    "telegram login",
                    "fail",
                    f"cannot reach the Bot API: {type(exc).__name__}",
                    "check the network (or [telegram] api_base_url)",
                )
            ]
    user = me["result"]
    checks = [Check("telegram login", "ok", f"@{user.get('username')} (id {user.get('id')})")]
    if not tg.allowed_users and not tg.pairing:
        checks.append(
            Check(
                "telegram users",
                "warn",
                "allowed_users is empty: the bot answers nobody",
                "add your user id to [telegram] allowed_users (the bot tells you your id when you DM it), or set pairing = true",
            )
        )
    checks.append(_webhook_check(tg.mode, tg.webhook_url, info))
    return checks


def _webhook_check(mode: str, want_url: str | None, info: dict[str, Any]) -> Check:
    url = info.get("url") or ""
    pending = int(info.get("pending_update_count") or 0)
    error = info.get("last_error_message")
    if mode == "polling":
        if url:
            return Check(
                "telegram webhook",
                "warn",
                f"a webhook is set ({url}); polling mode removes it at start, keeping the {pending} pending update(s)",
                "nothing to do, unless another program uses this bot token",
            )
        return Check("telegram webhook", "ok", f"none (polling); {pending} update(s) waiting")
    if error:
        return Check(
            "telegram webhook",
            "fail",
            f"Telegram reports: {error} ({pending} pending)",
            "check that webhook_url reaches webhook_listen:webhook_port through your proxy, with a valid certificate",
        )
    if url != want_url:
        return Check(
            "telegram webhook",
            "ok",
            f"currently {url or 'none'}; set to {want_url} at start ({pending} pending)",
        )
    return Check("telegram webhook", "ok", f"{url}; {pending} update(s) waiting")


# ---- Discord ---------------------------------------------------------------------------------
async def check_discord(settings: Settings) -> list[Check]:
    import httpx

    dc = settings.discord
    token = dc.resolved_token(settings.environ)
    if not dc.enabled:
        return [Check("discord", "ok", "not enabled (no DISCORD_BOT_TOKEN)")]
    if not token:
        return [
            Check(
                "discord",
                "fail",
                "enabled but no token",
                f"set {dc.token_env} (developer portal → Bot → Reset Token)",
            )
        ]
    base = (dc.api_base_url or DISCORD_API).rstrip("/")
    headers = {"Authorization": f"Bot {token}", "User-Agent": "DiscordBot (tapebot doctor, 1)"}
    async with httpx.AsyncClient(timeout=NETWORK_TIMEOUT, headers=headers) as http:
        try:
            me = await http.get(f"{base}/users/@me")
            if me.status_code == 401:
                return [
                    Check(
                        "discord login",
                        "fail",
                        "the token was refused (401)",
                        f"developer portal → your application → Bot → Reset Token, into {dc.token_env}",
                    )
                ]
            me.raise_for_status()
            app = await http.get(f"{base}/oauth2/applications/@me")
            app.raise_for_status()
        except (httpx.HTTPError, ValueError) as exc:
            return [
                Check(
                    "discord login",
                    "fail",
                    f"cannot reach Discord: {type(exc).__name__}",
                    "check the network (or [discord] api_base_url)",
                )
            ]
    user, flags = me.json(), int(app.json().get("flags") or 0)
    checks = [Check("discord login", "ok", f"{user.get('username')} (id {user.get('id')})")]
    has_content = bool(flags & MESSAGE_CONTENT_FLAGS)
    if dc.message_content_intent and not has_content:
        checks.append(
            Check(
                "discord intents",
                "fail",
                "message_content_intent = true, but the Message Content intent is off for this application: "
                "Discord would refuse the connection",
                "developer portal → Bot → Privileged Gateway Intents → Message Content Intent, "
                "or set [discord] message_content_intent = false",
            )
        )
    elif dc.message_content_intent:
        checks.append(Check("discord intents", "ok", "Message Content intent on (portal and config)"))
    else:
        checks.append(
            Check(
                "discord intents",
                "ok",
                "Message Content intent not requested: DMs, mentions and slash commands work",
            )
        )
    if not dc.allowed_users and not dc.pairing:
        checks.append(
            Check(
                "discord users",
                "warn",
                "allowed_users is empty: the bot answers nobody",
                "add your user id to [discord] allowed_users (Developer Mode → right-click yourself → Copy User ID)",
            )
        )
    return checks


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


def check_sandbox(settings: Settings, status: Callable[[Any], Any] | None = None) -> Check:
    """What exec_command will do here: run in bubblewrap, run unconfined (opted in), or be refused."""
    from agent.tools import sandbox
    from bot.app import local_policy

    policy = local_policy(settings)
    st = (status or sandbox.status)(policy)
    if st.sandboxed:
        return Check("sandbox", "ok", f"bubblewrap works here: {sandbox.describe(policy)}")
    if st.allowed:
        return Check(
            "sandbox",
            "warn",
            f"{st.reason}; unsandboxed_exec = true, so shell commands run WITHOUT a sandbox",
            "install bubblewrap (apt-get install bubblewrap) and remove unsandboxed_exec",
        )
    return Check(
        "sandbox",
        "warn",
        f"{st.reason}: exec_command is refused (everything else works)",
        "install bubblewrap: apt-get install bubblewrap (Debian/Ubuntu), dnf install bubblewrap (Fedora)",
    )
