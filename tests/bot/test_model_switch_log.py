"""The model chain's switch log names what really happened (a retry of the same model is not a switch)."""

from __future__ import annotations

import logging

from bot.app import log_model_switch


def test_same_model_retry_says_retry(caplog):
    caplog.set_level(logging.WARNING, logger="tapebot")
    log_model_switch("main", "main", "HTTP 503")
    assert caplog.messages == ["model main failed (HTTP 503); retrying it once"]


def test_switch_names_the_next_model(caplog):
    caplog.set_level(logging.WARNING, logger="tapebot")
    log_model_switch("main", "backup", "timed out")
    assert caplog.messages == ["model main failed (timed out); using backup"]
