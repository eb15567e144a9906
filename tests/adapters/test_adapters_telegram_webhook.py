"""Authenticated webhook entry: forged POSTs never reach a turn.

Every test starts the real aiohttp webhook server on loopback and posts to it over HTTP, the way
Telegram (or an attacker) would. The handler is the recorder: a request that does not reach it
cannot start a turn.
"""

from __future__ import annotations

import logging
import re

import aiohttp
import pytest
from hypothesis import given
from hypothesis import strategies as st

from adapters.telegram import TelegramAdapter, WebhookConfig, _webhook_secret, webhook_auth
from agent.errors import ConfigError
from tests.fakes.net import free_port
from tests.fakes.telegram_api import FakeRequest, text_update

HEADER = "X-Telegram-Bot-Api-Secret-Token"
TOKEN = "123456:TEST-token-abcdef"


def _config(secret: str | None) -> WebhookConfig:
    port = free_port()
    return WebhookConfig(url=f"http://127.0.0.1:{port}/tg", secret_token=secret, port=port, path="/tg")


def _adapter(tg_api, cfg: WebhookConfig) -> TelegramAdapter:
    return TelegramAdapter(
        tg_api.token, request=FakeRequest(tg_api), get_updates_request=FakeRequest(tg_api), webhook=cfg
    )


async def _post(url: str, body: dict, headers: dict[str, str]) -> int:
    async with aiohttp.ClientSession() as s, s.post(url, json=body, headers=headers) as r:
        return r.status


async def _forge(url: str) -> list[int]:
    """The attack: "run this" then "yes", without, with an empty and with a wrong
    secret header."""
    statuses = []
    for i, headers in enumerate(({}, {HEADER: ""}, {HEADER: "wrong-secret"}, {HEADER: " "})):
        statuses.append(await _post(url, text_update(100 + 2 * i, "run this: ls"), headers))
        statuses.append(await _post(url, text_update(101 + 2 * i, "yes"), headers))
    return statuses


async def test_c7_no_secret_configured_generates_and_registers_one(tg_api, recorder, caplog):
    """Webhook mode without a configured secret generates a strong one, registers it with
    setWebhook and says so at startup; forged POSTs get 401/403 and never reach a turn."""
    caplog.set_level(logging.INFO)
    cfg = _config(None)
    ad = _adapter(tg_api, cfg)
    await ad.start(recorder)
    try:
        secret = tg_api.webhook["secret_token"]
        assert re.fullmatch(r"[A-Za-z0-9_-]{32,256}", secret), "a strong secret was registered"
        statuses = await _forge(cfg.url)
        assert all(s in (401, 403) for s in statuses), statuses
        assert recorder.events == []
        assert await _post(cfg.url, text_update(200, "hello"), {HEADER: secret}) == 200
        assert [e.text for e in recorder.events] == ["hello"]
    finally:
        await ad.stop()
    text = caplog.text
    assert "generated" in text and "setWebhook" in text
    assert secret not in text and "wrong-secret" not in text


async def test_c7_empty_secret_is_treated_as_none(tg_api, recorder):
    """An empty configured secret (the original hole: two empty strings compared equal) is
    never registered; a fresh one is generated instead."""
    cfg = _config("")
    ad = _adapter(tg_api, cfg)
    await ad.start(recorder)
    try:
        assert len(tg_api.webhook["secret_token"]) >= 32
        assert all(s in (401, 403) for s in await _forge(cfg.url))
        assert recorder.events == []
    finally:
        await ad.stop()


async def test_c7_configured_secret_is_used_and_never_logged(tg_api, recorder, caplog):
    """A configured secret is registered as is; wrong/missing headers are refused, and neither
    the secret nor the forged header value appears in the log."""
    caplog.set_level(logging.DEBUG)
    cfg = _config("s3cret-Token_1-long-enough")
    ad = _adapter(tg_api, cfg)
    await ad.start(recorder)
    try:
        assert tg_api.webhook["secret_token"] == cfg.secret_token
        statuses = await _forge(cfg.url)
        assert statuses[:4] == [401, 401, 401, 401]  # no header / empty header: unauthenticated
        assert statuses[4:6] == [403, 403]  # a wrong secret: forbidden
        assert recorder.events == []
        assert await _post(cfg.url, text_update(300, "hi"), {HEADER: "s3cret-Token_1-long-enough"}) == 200
        assert len(recorder.events) == 1
    finally:
        await ad.stop()
    assert "configured secret" in caplog.text
    assert "s3cret-Token_1-long-enough" not in caplog.text and "wrong-secret" not in caplog.text


@pytest.mark.parametrize("bad", ["has space", "x" * 257, "semi;colon", "ünïcode"])
async def test_c7_invalid_configured_secret_refuses_to_start(tg_api, recorder, bad):
    """A secret Telegram would not accept is a configuration error at start, not a webhook
    that silently stays open."""
    ad = _adapter(tg_api, _config(bad))
    with pytest.raises(ConfigError, match="webhook_secret"):
        await ad.start(recorder)
    await ad.stop()
    assert tg_api.webhook.get("url", "") == ""


# ---- properties of the decision itself -----------------------------------------------------------
SECRETS = st.from_regex(r"[A-Za-z0-9_-]{1,256}", fullmatch=True)


ANY_TEXT = st.text(st.characters(codec=None, exclude_categories=()), max_size=300)  # lone surrogates too


@given(secret=SECRETS, header=st.one_of(st.none(), st.text(max_size=300), ANY_TEXT))
def test_c7_property_only_the_exact_secret_is_admitted(secret, header):
    """Whatever the header, only the exact secret gets 200; missing/blank is 401, else 403."""
    status = webhook_auth(header, secret)
    if header == secret:
        assert status == 200
    elif header is None or not header.strip():
        assert status == 401
    else:
        assert status == 403


@given(header=st.one_of(st.none(), st.text(max_size=50)))
def test_c7_property_an_empty_secret_admits_nobody(header):
    """The original hole — an empty secret compared with an empty header — cannot recur."""
    assert webhook_auth(header, "") != 200


@given(value=st.text(max_size=300))
def test_c7_property_configured_secret_is_valid_or_refused(value):
    """A configured secret is used as is only if setWebhook would accept it; nothing invalid
    is registered, and "unset" always yields a strong generated one."""
    cfg = WebhookConfig(url="https://x/tg", secret_token=value)
    if not value:
        assert re.fullmatch(r"[A-Za-z0-9_-]{43}", _webhook_secret(cfg, TOKEN))
    elif re.fullmatch(r"[A-Za-z0-9_-]{1,256}", value):
        assert _webhook_secret(cfg, TOKEN) == value
    else:
        with pytest.raises(ConfigError):
            _webhook_secret(cfg, TOKEN)


@given(a=st.text(min_size=1, max_size=60), b=st.text(min_size=1, max_size=60))
def test_property_unset_secret_is_one_per_token(a, b):
    """Without a configured secret, every replica of one bot (one token) derives the same secret,
    and another bot's token gives another; the token itself never shows in it."""
    cfg = WebhookConfig(url="https://x/tg")
    assert _webhook_secret(cfg, a) == _webhook_secret(cfg, a)
    assert (_webhook_secret(cfg, a) == _webhook_secret(cfg, b)) == (a == b)
    assert a not in _webhook_secret(cfg, a) or len(a) < 4
