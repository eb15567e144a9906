"""The inbound Telegram parser (adapters/telegram_wire.py): strict where the adapter relies on a
field, UTF-16 offsets like Telegram's, and the same answers python-telegram-bot gives."""

import pytest
from telegram import Update

from adapters.telegram_wire import MalformedUpdate, parse_update

USER = {"id": 7, "is_bot": False, "first_name": "Ann", "last_name": "Lee", "language_code": "zh-hans"}
GROUP = {"id": -100, "type": "supergroup", "title": "Traders", "is_forum": True}


def message(**kw):
    return {"message_id": 5, "date": 1_700_000_000, "chat": GROUP, "from": USER, **kw}


def test_entities_are_cut_in_utf16_code_units_like_telegram():
    # "📈" is two UTF-16 code units: the mention starts at offset 3, not 2
    text = "📈 @tapebot_test_bot 分析 600519"
    update = parse_update(
        {
            "update_id": 1,
            "message": message(text=text, entities=[{"type": "mention", "offset": 3, "length": 17}]),
        }
    )
    msg = update.message
    assert msg is not None
    assert msg.entity_text(msg.entities[0]) == "@tapebot_test_bot"
    # python-telegram-bot reads the same entity the same way
    ptb = Update.de_json(
        {
            "update_id": 1,
            "message": message(text=text, entities=[{"type": "mention", "offset": 3, "length": 17}]),
        },
        None,
    ).message
    assert ptb is not None and ptb.parse_entity(ptb.entities[0]) == msg.entity_text(msg.entities[0])


def test_names_topics_and_replies():
    reply = message(message_id=4, text="old", reply_to_message=message(message_id=3, text="older"))
    update = parse_update(
        {
            "update_id": 2,
            "message": message(text="hi", message_thread_id=9, is_topic_message=True, reply_to_message=reply),
        }
    )
    msg = update.message
    assert msg is not None and msg.from_user is not None
    assert msg.from_user.full_name == "Ann Lee" and msg.from_user.language_code == "zh-hans"
    assert msg.chat.name == "Traders" and msg.message_thread_id == 9 and msg.is_topic_message
    assert msg.reply_to is not None and msg.reply_to.message_id == 4
    assert msg.reply_to.reply_to is None  # one level is all the adapter reads
    assert msg.sent_at.timestamp() == 1_700_000_000
    private = parse_update(
        {"update_id": 3, "message": message(chat={"id": 7, "type": "private", "first_name": "Ann"}, text="x")}
    )
    assert private.message is not None and private.message.chat.name == "Ann"


def test_non_text_messages_and_unknown_kinds_parse_without_text():
    sticker = parse_update({"update_id": 4, "message": message(sticker={"file_id": "s"})})
    assert sticker.message is not None and sticker.message.text is None
    other = parse_update({"update_id": 5, "poll": {"id": "p"}})
    assert other.message is None and other.callback_query is None


def test_callback_on_an_inaccessible_message():
    update = parse_update(
        {
            "update_id": 6,
            "callback_query": {
                "id": "cq1",
                "from": USER,
                "data": "once:ap_1",
                "message": {"chat": GROUP, "message_id": 11, "date": 0},
            },
        }
    )
    cq = update.callback_query
    assert cq is not None and cq.data == "once:ap_1" and cq.from_user.id == 7
    assert cq.message is not None and not cq.message.accessible and cq.message.message_id == 11


@pytest.mark.parametrize(
    "item",
    [
        "not an object",
        {"message": message(text="no update id")},
        {"update_id": True, "message": message(text="a bool is not an id")},
        {"update_id": 1, "message": {"message_id": "not-a-number", "chat": "garbage"}},
        {"update_id": 1, "message": message(chat={"id": 1})},  # no chat type
        {"update_id": 1, "message": message(text=5)},
        {
            "update_id": 1,
            "message": message(text="x", entities=[{"type": "bold", "offset": "0", "length": 1}]),
        },
        {"update_id": 1, "message": message(text="x", entities={"type": "bold"})},
        {"update_id": 1, "message": message(**{"from": "nobody"}, text="x")},
        {"update_id": 1, "callback_query": {"from": USER, "data": "x"}},  # no id
    ],
)
def test_malformed_updates_are_rejected(item):
    with pytest.raises(MalformedUpdate):
        parse_update(item)


def test_a_lone_surrogate_is_replaced_and_entities_still_line_up():
    """Half an emoji ("\\ud83d") from a client is replaced on the way in."""
    import json

    raw = json.loads(
        '{"update_id": 1, "message": {"message_id": 5, "date": 1700000000, "chat": {"id": 7, "type": '
        '"private", "first_name": "A\\ud83d"}, "from": {"id": 7, "is_bot": false, "first_name": "A"}, '
        '"text": "\\ud83d @tapebot_test_bot hi", "entities": [{"type": "mention", "offset": 2, "length": 17}]}}'
    )
    msg = parse_update(raw).message
    assert msg is not None and msg.text == "\ufffd @tapebot_test_bot hi"
    assert msg.entity_text(msg.entities[0]) == "@tapebot_test_bot"
    assert msg.chat.name == "A\ufffd"
    msg.text.encode("utf-8")
