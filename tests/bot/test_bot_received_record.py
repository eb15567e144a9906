"""The record a received message is kept in until it is in its history (bot/received.py)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from adapters.base import ChatRef, InboundMessage, UserRef
from bot.received import inbound_from_record, pending_record


def test_a_message_round_trips_exactly():
    msg = InboundMessage(
        update_id="77",
        chat=ChatRef("telegram", "-100500", "7", True, "Desk"),
        user=UserRef("telegram", "1001", "Alice 李", "zh-hans", "alice", False),
        text="@bot 这个呢？\u202e",
        reply_to_message_id="55",
        sent_at=datetime(2026, 12, 1, 8, 30, 1, tzinfo=UTC),
        message_id="101",
        addressed=True,
        reply_to_bot=True,
    )
    back = inbound_from_record("77", pending_record(msg))
    assert back == msg and back.chat.title == "Desk"


@pytest.mark.parametrize(
    "record",
    [{}, {"v": 2}, {"v": 1, "chat": ["telegram"]}, {"v": 1, "chat": None}, {"v": 1, "text": "x"}],
)
def test_a_malformed_record_is_a_value_error(record):
    with pytest.raises(ValueError, match="malformed received-message record"):
        inbound_from_record("1", record)
