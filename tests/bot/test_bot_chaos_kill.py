"""Chaos: `tapebot run` as a real process — Telegram over HTTP through the fake Bot API
server, the model through the real OpenAI SDK and the scripted LLM server — is killed with SIGKILL
0–200 ms after each of 20 events (a tap on "Allow once" of a paper trade card, or `/brief now`
once it is acknowledged), then started again on the same home. After each restart:

- every approved order fills exactly once (its trade row, by its unique quantity);
- every acknowledged brief arrives;
and at the end no progress line is left at ⏸ and no turn's model input holds the same user
message twice.

The delays come from a seeded generator (the same 20 every run); the test asserts on outcomes,
never on timings. It runs in the normal suite (about a minute on a 2-core machine).
"""

from __future__ import annotations

import asyncio
import os
import random
import re
import sqlite3
from collections import Counter
from pathlib import Path
from typing import Any

from tests.bot.bot_process import BotProcess as Bot
from tests.fakes.llm_server import Reply, ScriptedLLMServer, ToolCall
from tests.fakes.telegram_api import FakeBotAPI, buttons_of

ROOT = Path(__file__).resolve().parents[2]
TOKEN = "123456:TEST-token-abcdef"
USER = 1001
CODE = "000725"  # a cheap stock of the bundled dataset: 20 orders fit the paper account's cash
EVENTS = 20
OUTCOME_WAIT = 45.0  # seconds an outcome may take after a restart (a slow shared machine)


def _text(message: dict[str, Any]) -> str:
    content = message.get("content")
    if isinstance(content, list):
        return " ".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
    return str(content or "")


def _answer(body: dict[str, Any]) -> Reply:
    """The model: "buy N" proposes the order, a tool result gets a short answer, a brief gets a
    brief. The runtime's context block (a user message after the user's own) is skipped."""
    messages = [m for m in body.get("messages") or [] if m.get("role") != "system"]
    while messages and messages[-1].get("role") == "user" and "for reference only" in _text(messages[-1]):
        messages.pop()
    last = messages[-1] if messages else {}
    if last.get("role") == "tool":
        return Reply("Order handled.")
    text = _text(last)
    if "daily brief" in text.lower():
        return Reply("Your brief: markets calm.")
    asked = re.findall(r"\bbuy (\d+)\b", text)
    if asked:
        qty = int(asked[-1])
        return Reply(tool_calls=[ToolCall("execute_trade", {"code": CODE, "side": "buy", "quantity": qty})])
    return Reply("ok")


def _trades(home: Path) -> list[tuple[float, str]]:
    if not (home / "tapebot.db").exists():
        return []
    con = sqlite3.connect(home / "tapebot.db")
    try:
        return con.execute("SELECT quantity, status FROM market_trades").fetchall()
    except sqlite3.OperationalError:  # not created yet
        return []
    finally:
        con.close()


def _shown(api: FakeBotAPI) -> list[str]:
    return [m.get("text", "") for (c, _), m in api.messages.items() if c == USER]


async def test_chaos_kill_9_after_taps_and_brief_now(tmp_path):
    rng = random.Random(27)
    api = FakeBotAPI(token=TOKEN)
    await api.serve()
    home = tmp_path / "home"
    home.mkdir()
    (home / "config.toml").write_text(
        f'[telegram]\napi_base_url = "{api.base_url}"\nallowed_users = [{USER}]\n'
    )
    async with ScriptedLLMServer() as llm:
        llm.default = _answer
        env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
        env.update(
            TAPEBOT_HOME=str(home),
            TELEGRAM_BOT_TOKEN=TOKEN,
            OPENAI_API_KEY="sk-test-000000000000",
            OPENAI_BASE_URL=llm.openai_base_url,
            TAPEBOT_SCHEDULER__ENABLED="true",
            TAPEBOT_MEMORY__ENABLED="false",
        )
        bot = Bot(home, env)
        acks = 0
        approved: list[int] = []
        await bot.start(api)
        try:
            for n in range(EVENTS):
                delay = rng.uniform(0.0, 0.2)
                if n % 2 == 0:  # a tap on "Allow once"
                    qty = 100 * (n // 2 + 1)
                    api.push_text(USER, f"buy {qty}", user_id=USER)
                    card = await api.wait_for(
                        lambda q=qty: next(
                            (
                                m
                                for m in api.sent(USER)
                                if f'"quantity": {q}' in m.get("text", "") and buttons_of(m)
                            ),
                            None,
                        ),
                        timeout=OUTCOME_WAIT,
                    )
                    once = next(
                        b["callback_data"] for b in buttons_of(card) if b["callback_data"].startswith("o:")
                    )
                    api.push_callback(USER, card["message_id"], once, user_id=USER)
                    approved.append(qty)
                else:  # /brief now, once it is acknowledged
                    before = sum("Preparing your brief" in t for t in api.texts(USER))
                    api.push_text(USER, "/brief now", user_id=USER)
                    await api.wait_for(
                        lambda b=before: sum("Preparing your brief" in t for t in api.texts(USER)) > b,
                        timeout=OUTCOME_WAIT,
                    )
                    acks += 1
                await asyncio.sleep(delay)
                await bot.kill()
                await bot.start(api)
                # every approved order fills, and exactly once
                await api.wait_for(
                    lambda: {q for q, s in _trades(home) if s == "filled"} >= set(approved),
                    timeout=OUTCOME_WAIT,
                )
                # every acknowledged brief arrives
                await api.wait_for(
                    lambda a=acks: sum("Your brief" in t for t in api.texts(USER)) >= a, timeout=OUTCOME_WAIT
                )
            await asyncio.sleep(1.0)  # anything still settling after the last restart
        finally:
            code = await bot.stop()
        await api.close()
    logs = "\n".join(p.read_text(errors="replace")[-1500:] for p in sorted(tmp_path.glob("run*.log")))
    assert code == 0, logs[-3000:]
    fills = Counter(q for q, s in _trades(home) if s == "filled")
    assert fills == Counter({float(q): 1 for q in approved}), (fills, logs[-3000:])
    assert all(s == "filled" for _, s in _trades(home)), _trades(home)
    assert sum("Your brief" in t for t in api.texts(USER)) >= acks == EVENTS // 2
    stuck = [t for t in _shown(api) if "⏸" in t]
    assert not stuck, stuck
    # no turn's model input holds the same user message twice
    for req in llm.requests:
        users = [str(m.get("content")) for m in req.body.get("messages", []) if m.get("role") == "user"]
        repeated = [u for u, k in Counter(users).items() if k > 1 and u.startswith("buy ")]
        assert not repeated, repeated
