"""The checks that call out: one tiny model reply per configured model, Telegram getMe and
getWebhookInfo, Discord login and the application's intent flags. Never a secret in what they say."""

from __future__ import annotations

import asyncio
from typing import Any

from bot.doctor.check import Check
from config.settings import ModelConfig, Settings

NETWORK_TIMEOUT = 20.0
# Discord application flags: the Message Content intent switched on in the developer portal
# (GATEWAY_MESSAGE_CONTENT for verified bots, _LIMITED for bots in fewer than 100 servers).
MESSAGE_CONTENT_FLAGS = (1 << 18) | (1 << 19)
DISCORD_API = "https://discord.com/api/v10"


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
    from agent import Message
    from agent.errors import ModelError
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
