"""Redactor: by key name, by configured value, by token shape; nested values; the log filter."""

from __future__ import annotations

import io
import logging

import pytest

from agent.redact import MASK, RedactingFilter, Redactor, install_log_redaction, is_sensitive_key

TG_TOKEN = "7212345678:AAH3xQkLr9mZpT2vW8yBn4cD5eF6gH7iJ0k"


@pytest.fixture
def r(secret) -> Redactor:
    return Redactor([secret, "short", "", "hunter2-password"])


def test_configured_values(r, secret):
    assert r.text(f"the key is {secret}!") == "the key is ***!"
    assert r.text("db pass hunter2-password") == "db pass ***"
    assert r.text("short words stay short") == "short words stay short"  # < 6 chars never masked
    from urllib.parse import quote

    assert secret not in r.text(f"?k={quote(secret, safe='')}")


@pytest.mark.parametrize(
    "leak",
    [
        "sk-ant-api03-AbCdEfGhIjKlMnOpQrStUvWxYz012345",
        "sk-proj-AbCdEfGhIjKlMnOpQrSt",
        "sk-AbCdEfGhIjKlMnOpQrStUv",
        TG_TOKEN,
        "AKIAIOSFODNN7EXAMPLE",
        "ghp_aBcDeFgHiJkLmNoPqRsTuVwXyZ0123456789",
        "MTA4NjY0NzM2NTg3MTY0MDU3Mg.GhK3x1.AbCdEfGhIjKlMnOpQrStUvWxYz01234567",
        "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U",
    ],
)
def test_token_shapes(leak):
    out = Redactor().text(f"value: {leak} end")
    assert leak not in out and MASK in out and out.endswith(" end")


def test_telegram_token_inside_bot_api_url():
    line = f"HTTP Request: POST https://api.telegram.org/bot{TG_TOKEN}/getUpdates failed"
    out = Redactor().text(line)
    assert TG_TOKEN not in out
    assert out == "HTTP Request: POST https://api.telegram.org/bot***/getUpdates failed"


@pytest.mark.parametrize(
    ("text", "gone"),
    [
        ("Authorization: Bearer abc.def-ghi", "abc.def-ghi"),
        ("authorization: Basic dXNlcjpwYXNz", "dXNlcjpwYXNz"),
        ("curl -H 'Authorization: Bot XYZ123456'", "XYZ123456"),
        ("header Bearer abcdefghijklmnopqrstuvwxyz", "abcdefghijklmnopqrstuvwxyz"),
        ("https://x.example/api?api_key=abcd1234&q=1", "abcd1234"),
        ("OPENAI_API_KEY=whatever-it-is", "whatever-it-is"),
        ('{"password": "p@ss"}', "p@ss"),
        ("https://x.example/cb?token=zzz999", "zzz999"),
    ],
)
def test_contextual_patterns(text, gone):
    out = Redactor().text(text)
    assert gone not in out and MASK in out


@pytest.mark.parametrize(
    "prose",
    [
        "bearer bonds and basic analysis of the bot response",
        "input_tokens: 1234, max_tokens=4096",
        "600519 closed at 1700.50 on 2025-01-02 10:30:00",
        "The token count was high",
    ],
)
def test_ordinary_text_survives(prose):
    assert Redactor(["long-enough-secret"]).text(prose) == prose


def test_idempotent(r, secret):
    once = r.text(f"Authorization: Bearer {secret} and api_key=foo-bar-baz {TG_TOKEN}")
    assert r.text(once) == once


def test_sensitive_key_names():
    for key in ("api_key", "apiKey", "X-Api-Key", "token", "access_token", "Authorization", "password",
                "passwd", "secret", "Cookie", "Set-Cookie", "bot_token", "telegram_bot_token",
                "openai_api_key", "client_secret"):  # fmt: skip
        assert is_sensitive_key(key), key
    for key in ("input_tokens", "output_tokens", "max_tokens", "name", "keyword", "tokens", "path"):
        assert not is_sensitive_key(key), key


def test_value_deep(r, secret):
    data = {
        "model": "claude",
        "usage": {"input_tokens": 10, "output_tokens": 2},
        "headers": {"Authorization": "Bearer x", "X-Api-Key": "k", "Accept": "*/*"},
        "cookies": [("Set-Cookie", "sid=1"), ("Accept", "x")],
        "args": [{"nested": {"deeper": [f"prefix {secret} suffix", {"password": 123}]}}],
        "token": None,
        "count": 3,
    }
    out = r.value(data)
    assert out["model"] == "claude" and out["usage"] == {"input_tokens": 10, "output_tokens": 2}
    assert out["headers"] == {"Authorization": MASK, "X-Api-Key": MASK, "Accept": "*/*"}
    assert out["cookies"] == [("Set-Cookie", MASK), ("Accept", "x")]
    assert out["args"][0]["nested"]["deeper"] == ["prefix *** suffix", {"password": MASK}]
    assert out["token"] is None and out["count"] == 3
    assert data["headers"]["Authorization"] == "Bearer x"  # input untouched


def _logger_with_stream(name: str) -> tuple[logging.Logger, io.StringIO, logging.Handler]:
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(logging.Formatter("%(name)s %(message)s"))
    logger = logging.getLogger(name)
    logger.setLevel(logging.DEBUG)
    logger.propagate = False
    logger.addHandler(handler)
    return logger, stream, handler


def test_logging_filter_on_handler(r, secret):
    logger, stream, handler = _logger_with_stream("tapebot.test.redact")
    handler.addFilter(RedactingFilter(r))
    try:
        logger.info("calling %s with key %s", f"https://api.telegram.org/bot{TG_TOKEN}/getMe", secret)
        try:
            raise RuntimeError(f"boom at https://api.telegram.org/bot{TG_TOKEN}/send")
        except RuntimeError:
            logger.exception("failed with %s", {"api_key": "plain-key-value"})
    finally:
        logger.removeHandler(handler)
    text = stream.getvalue()
    assert TG_TOKEN not in text and secret not in text and "plain-key-value" not in text
    assert "RuntimeError" in text and "Traceback" in text  # the traceback is kept, redacted
    assert "/bot***/getMe" in text


def test_install_log_redaction_covers_every_logger(r, secret):
    logger, stream, handler = _logger_with_stream("httpx.fake")
    uninstall = install_log_redaction(r)
    try:
        logger.warning("HTTP Request: GET https://api.telegram.org/bot%s/getUpdates", TG_TOKEN)
        logger.debug("secret=%s", secret)
    finally:
        uninstall()
        logger.removeHandler(handler)
    text = stream.getvalue()
    assert TG_TOKEN not in text and secret not in text
    assert logging.getLogRecordFactory() is logging.LogRecord


def test_log_redaction_installed_twice_and_removed_in_either_order_leaves_nothing_behind():
    """Two Apps in one process (replicas in a test) install and remove it in any order; afterwards
    a record is neither redacted nor marked by a redactor that is gone."""
    first, second = (
        install_log_redaction(Redactor(["aaaaaa-secret-1"])),
        install_log_redaction(Redactor(["bbbbbb-secret-2"])),
    )
    first()  # taken out before the one installed after it
    second()
    record = logging.getLogger("tapebot.test.order").makeRecord(
        "x", logging.INFO, "f", 1, "aaaaaa-secret-1 bbbbbb-secret-2", None, None
    )
    assert record.getMessage() == "aaaaaa-secret-1 bbbbbb-secret-2"
    assert not getattr(record, "_tapebot_redacted", False)
