"""The one command definition on the wire: the Telegram menu per language (fake Bot API), Discord's
slash commands with typed options, choices, subcommands and localizations (fake REST), an
invocation coming back as the `InboundCommand` args a person would type, and autocomplete answered
through the fake gateway (interaction type 4 → callback type 8)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from adapters.base import InboundCommand
from adapters.commandspec import CommandSpec, OptionSpec, SubcommandSpec, Words, args_text
from bot.commands import builtin_commands
from bot.commands.complete import completer


def _specs() -> list[CommandSpec]:
    return [c.spec for c in builtin_commands()]


def _by_name(payload: list[dict]) -> dict[str, dict]:
    return {c["name"]: c for c in payload}


async def test_telegram_menu_in_english_and_chinese(make_tg, tg_api, recorder):
    ad = await make_tg(recorder)
    await ad.set_commands(_specs())
    en = {c["command"]: c["description"] for c in tg_api.commands[""]}
    zh = {c["command"]: c["description"] for c in tg_api.commands["zh"]}
    assert list(en) == [s.name for s in _specs()] == list(zh)
    assert en["lang"] == "Switch language (English / 中文)" and zh["new"] == "开始新对话"
    assert zh["brief"].startswith("每日简报") and zh["memory"].startswith("你的记忆")


async def test_discord_payload_has_typed_options_choices_subcommands(make_dc, dc_fake, recorder):
    ad = await make_dc(recorder)
    await ad.set_commands(_specs())
    payload = _by_name(dc_fake.command_syncs[0]["payload"])
    lang = payload["lang"]["options"][0]
    assert lang["type"] == 3 and lang["required"] is True
    assert [c["value"] for c in lang["choices"]] == ["en", "zh"]
    assert lang["choices"][0]["name_localizations"] == {"zh-CN": "英文"}
    model = payload["model"]["options"][0]
    assert model["autocomplete"] is True and "choices" not in model
    brief = payload["brief"]["options"]
    assert [o["name"] for o in brief] == ["show", "set", "now", "pause", "resume", "off", "tz"]
    assert all(o["type"] == 1 for o in brief)
    set_options = brief[1]["options"]
    assert [o["name"] for o in set_options] == ["time", "days", "zone"]  # required first
    assert set_options[0]["required"] is True and set_options[2]["autocomplete"] is True
    assert [c["value"] for c in set_options[1]["choices"]] == ["daily", "weekdays", "trading_days"]
    for name in ("memory", "tasks", "rules"):
        assert all(o["type"] == 1 for o in payload[name]["options"]), name
    forget = next(o for o in payload["memory"]["options"] if o["name"] == "forget")
    assert forget["options"][0]["type"] == 4  # an integer
    assert "options" not in payload["new"]
    # Chinese under zh-CN only: no Simplified text shown to Traditional-Chinese clients
    for item in payload.values():
        assert set(item["description_localizations"]) == {"zh-CN"}, item["name"]
    assert payload["new"]["description_localizations"]["zh-CN"] == "开始新对话"


async def test_discord_subcommands_arrive_as_typed_text(make_dc, dc_fake, recorder):
    ad = await make_dc(recorder)
    await ad.set_commands(_specs())
    await dc_fake.push_command("brief", [{"type": 1, "name": "off", "options": []}])
    await dc_fake.push_command(
        "brief",
        [{"type": 1, "name": "set", "options": [
            {"type": 3, "name": "zone", "value": "Asia/Shanghai"},
            {"type": 3, "name": "time", "value": "08:30"},
            {"type": 3, "name": "days", "value": "weekdays"},
        ]}],
    )  # fmt: skip
    await dc_fake.push_command("memory", [{"type": 1, "name": "forget", "options": [
        {"type": 4, "name": "id", "value": 12}]}])  # fmt: skip
    await dc_fake.push_command("lang", [{"type": 3, "name": "language", "value": "zh"}])
    await dc_fake.push_command("rules", [{"type": 1, "name": "list"}])
    await dc_fake.push_slash("approve", "ab12")  # the old free-text `args` option still reads
    await dc_fake.wait_for(lambda: len(recorder.events) == 6)
    # interactions are acknowledged concurrently: their order is not the point here
    got = sorted((e.name, e.args) for e in recorder.events if isinstance(e, InboundCommand))
    assert got == sorted(
        [
            ("brief", "off"),
            ("brief", "08:30 weekdays Asia/Shanghai"),  # the spec order; "set" is no word of its own
            ("memory", "forget 12"),
            ("lang", "zh"),
            ("rules", "list"),
            ("approve", "ab12"),
        ]
    )


async def test_discord_autocomplete_for_models_and_time_zones(make_dc, dc_fake, recorder):
    ad = await make_dc(recorder)
    ad.completer = completer(lambda: ["gpt-main", "claude-fast", "claude-deep"])
    await ad.set_commands(_specs())
    await dc_fake.push_autocomplete("model", [{"type": 3, "name": "model", "value": "cla", "focused": True}])
    await dc_fake.wait_for(lambda: dc_fake.callbacks)
    answer = dc_fake.callbacks[0]
    assert answer["type"] == 8
    assert answer["data"]["choices"] == [
        {"name": "claude-fast", "value": "claude-fast"},
        {"name": "claude-deep", "value": "claude-deep"},
    ]
    await dc_fake.push_autocomplete(
        "brief", [{"type": 1, "name": "tz", "options": [
            {"type": 3, "name": "zone", "value": "asia/sha", "focused": True}]}],
    )  # fmt: skip
    await dc_fake.wait_for(lambda: len(dc_fake.callbacks) == 2)
    assert dc_fake.callbacks[1]["type"] == 8
    assert [c["value"] for c in dc_fake.callbacks[1]["data"]["choices"]] == ["Asia/Shanghai"]
    assert recorder.events == []  # suggestions are no command


def test_args_text_follows_the_spec_order():
    spec = CommandSpec(
        "x",
        Words("x", "x"),
        "session",
        subcommands=(
            SubcommandSpec("set", Words("s", "s"), (OptionSpec("a", Words("a", "a")), OptionSpec("b", Words("b", "b"))), word=""),
            SubcommandSpec("off", Words("o", "o")),
        ),
    )  # fmt: skip
    assert args_text(spec, "set", {"b": "2", "a": "1"}) == "1 2"
    assert args_text(spec, "off", {}) == "off"
    assert args_text(spec, "set", {"a": " ", "b": "2"}) == "2"  # an empty value is no word
    assert args_text(None, None, {"args": "free text"}) == "free text"


_WORD = st.text(alphabet=st.characters(blacklist_categories=("Z", "C")), min_size=1, max_size=12)


@given(
    sub=st.sampled_from([None, "set", "off", "other"]),
    values=st.dictionaries(st.sampled_from(["a", "b", "c", "extra"]), _WORD, max_size=4),
)
def test_args_text_keeps_every_value_in_the_spec_order(sub, values):
    """What the handlers parse is exactly what a person would type: the subcommand's word, then
    every given value once, the spec's options first in their order, nothing invented."""
    opts = (OptionSpec("a", Words("a", "a")), OptionSpec("b", Words("b", "b")))
    spec = CommandSpec(
        "x",
        Words("x", "x"),
        "session",
        subcommands=(
            SubcommandSpec("set", Words("s", "s"), opts, word=""),
            SubcommandSpec("off", Words("o", "o")),
        ),
    )
    words = args_text(spec, sub, values).split()
    head = [] if sub in (None, "set") else [sub]
    known = [k for k in ("a", "b") if sub == "set" and k in values]
    rest = [k for k in values if k not in known]
    assert words == head + [values[k] for k in known] + [values[k] for k in rest]


def test_time_zone_completion_finds_cities_by_the_names_people_type():
    from bot.commands.complete import timezones

    assert timezones("new york")[0] == "America/New_York"
    assert timezones("New_Y")[0] == "America/New_York"
    assert timezones("上海") == ["Asia/Shanghai"]
    assert timezones("beijing")[0] == "Asia/Shanghai"
    assert "Asia/Hong_Kong" in timezones("香港")
    assert timezones("")  # the common zones when nothing is typed
