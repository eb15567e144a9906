"""The terminal's side of one account: `tapebot link CODE` (a real subprocess) joins the identity that
asked for the code on Telegram (fake Bot API, in this process); a buy on Telegram is then in the
portfolio `tapebot chat -m` sees (a real subprocess against the scripted LLM server); `tapebot link
--remove` takes the terminal back to its own book."""

from __future__ import annotations

import asyncio
import json
import re

from agent.providers.scripted import reply
from tests.bot.conftest import ALICE
from tests.fakes.cli_kit import openai_env, run_cli, server  # noqa: F401
from tests.fakes.llm_server import Reply, ToolCall
from tests.fakes.telegram_api import button_of

CODE = re.compile(r"\b([A-HJ-NP-Z2-9]{8})\b")


def buttons_of(msg):
    return [b for row in (msg.get("reply_markup") or {}).get("inline_keyboard", []) for b in row]


def terminal_positions(home, server) -> list[dict]:  # noqa: F811
    server.script(Reply(tool_calls=[ToolCall("portfolio", {"mode": "view"})]), Reply("Here it is."))
    r = run_cli(home, openai_env(server), "chat", "-m", "how is my portfolio")
    assert r.returncode == 0, r.stderr
    tool = [m for m in server.requests[-1].body["messages"] if m["role"] == "tool"][-1]
    return [p for p in json.loads(tool["content"])["paper"]["positions"] if "600519" in p["symbol"]]


async def test_tapebot_link_joins_telegram_and_the_terminal_sees_its_buy(harness, server):  # noqa: F811
    await harness.start()
    api, home = harness.api, harness.home
    api.push_text(ALICE, "/link", user_id=ALICE)
    answer = await api.wait_for(lambda: next((x for x in api.texts(ALICE) if "tapebot link" in x), None))
    code = CODE.search(answer).group(1)

    # without a yes nothing is linked: the terminal shows whom the code links with, and stops
    r = await asyncio.to_thread(run_cli, home, {}, "link", code)
    assert r.returncode == 1 and "Telegram" in r.stdout and str(ALICE) in r.stdout, (r.stdout, r.stderr)
    assert "Not linked" in r.stderr
    r = await asyncio.to_thread(run_cli, home, {}, "link", code, "--yes")
    assert r.returncode == 0 and r.stdout.startswith("✅"), r.stderr
    r = await asyncio.to_thread(run_cli, home, {}, "link", code, "--yes")  # used up
    assert r.returncode == 1 and "not valid" in r.stderr

    harness.script.add(
        reply(tool_calls=[("execute_trade", {"code": "600519", "side": "buy", "quantity": 100})]),
        reply("Bought 100 shares of 600519 (paper)."),
    )
    api.push_text(ALICE, "buy 100 shares of 600519", user_id=ALICE)
    card = await api.wait_for(lambda: next((m for m in api.sent(ALICE) if buttons_of(m)), None), timeout=15)
    once = button_of(card, "o")
    api.push_callback(ALICE, card["message_id"], once["callback_data"], user_id=ALICE)
    await api.wait_for(lambda: any("Bought 100 shares" in x for x in api.texts(ALICE)), timeout=15)

    held = await asyncio.to_thread(terminal_positions, home, server)
    assert len(held) == 1 and held[0]["quantity"] == 100

    r = await asyncio.to_thread(run_cli, home, {}, "link")
    assert r.returncode == 0 and "Linked with: Telegram" in r.stdout, r.stderr
    r = await asyncio.to_thread(run_cli, home, {}, "link", "--remove")
    assert r.returncode == 0 and r.stdout.startswith("Unlinked"), r.stderr
    assert await asyncio.to_thread(terminal_positions, home, server) == []
    r = await asyncio.to_thread(run_cli, home, {}, "link", "--remove")
    assert r.returncode == 1 and "not linked" in r.stderr
