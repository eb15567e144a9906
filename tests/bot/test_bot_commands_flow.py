"""Chat commands end to end through the fake Telegram Bot API: /cancel (a blocked model call, a slow
tool, a waiting question, nothing running), /model, /lang, /status, the update_plan message and
the current-references block the runtime hands the model."""

from __future__ import annotations

import asyncio
import json
from typing import Any

from aiohttp import web

from agent.messages import Message
from agent.providers.base import ModelInfo
from agent.providers.scripted import ScriptedClient, ScriptExhausted, reply
from tests.bot.conftest import ALICE, Harness
from tests.fakes.telegram_api import FakeBotAPI

KEY = f"telegram:{ALICE}"


class GatedClient(ScriptedClient):
    """A ScriptedClient whose n-th model call (1-based) waits for the test before answering, as a
    slow provider does: `hold(n)` gives (started, release); `started` is set once that call is in
    flight, setting `release` lets it answer."""

    def __init__(self, *args: Any, **kw: Any) -> None:
        super().__init__(*args, **kw)
        self._gates: dict[int, tuple[asyncio.Event, asyncio.Event]] = {}

    def hold(self, n: int) -> tuple[asyncio.Event, asyncio.Event]:
        return self._gates.setdefault(n, (asyncio.Event(), asyncio.Event()))

    async def stream(self, request):  # type: ignore[override]
        self.requests.append(request)
        n = len(self.requests)
        if not self.script:
            raise ScriptExhausted(f"model call #{n} has no scripted turn")
        turn = self.script.pop(0)  # taken now: a call cancelled while held used up its turn
        gate = self._gates.get(n)
        if gate is not None:
            started, release = gate
            started.set()
            await release.wait()
        if isinstance(turn, BaseException):
            raise turn
        for item in turn(request) if callable(turn) else turn:
            if isinstance(item, BaseException):
                raise item
            yield item


class ModelsHarness(Harness):
    """The conftest Harness with two configured models, each answered by its own scripted client;
    `asked` records every model id the App's model factory was asked for."""

    def __init__(self, home, api, clients: dict[str, ScriptedClient]):
        super().__init__(home, api, clients["main"])
        self.clients = clients
        self.asked: list[str | None] = []
        home.mkdir(parents=True, exist_ok=True)
        (home / "config.toml").write_text(
            "".join(
                f'[[models]]\nid = "{mid}"\nprovider = "openai"\nmodel = "gpt-{mid}"\n'
                'api_key_env = "OPENAI_API_KEY"\n\n'
                for mid in clients
            )
        )

    def model_for(self, model_id: str | None) -> ScriptedClient:
        self.asked.append(model_id)
        return self.clients[model_id or "main"]


async def _state(h: Harness):
    state = await h.app.gateway.chats.by_key(KEY)
    assert state is not None
    return state


async def _history(h: Harness) -> list[Message]:
    return await h.app.store.load_messages((await _state(h)).session_id)


def _count(api: FakeBotAPI, needle: str, chat: int = ALICE) -> int:
    return sum(needle in t for t in api.texts(chat))


def _all_calls_answered(messages: list[Message]) -> dict[str, str]:
    """call id → the content of its tool result; fails if a call has none."""
    calls = [c for m in messages if m.role == "assistant" for c in m.tool_calls]
    results = {r.call_id: r.content for m in messages if m.role == "tool" for r in m.tool_results}
    missing = [c.name for c in calls if c.id not in results]
    assert not missing, f"tool calls without a result in the stored history: {missing}"
    return {c.id: results[c.id] for c in calls}


# ---- /cancel ------------------------------------------------------------------------------------


async def test_cancel_while_the_model_is_blocked_stops_the_turn(harness):
    harness.script = GatedClient()
    harness.script.add(reply("TOO LATE: this answer must never be shown"), reply("Back again."))
    started, release = harness.script.hold(1)
    await harness.start()
    api = harness.api
    try:
        api.push_text(ALICE, "analyze 600519", user_id=ALICE)
        await asyncio.wait_for(started.wait(), 3)
        state = await _state(harness)
        assert harness.app.gateway.lanes.of(state).is_running

        api.push_text(ALICE, "/cancel", user_id=ALICE)
        await api.wait_for(lambda: _count(api, "Stopped the running turn.") == 1)
        await asyncio.wait_for(
            harness.app.gateway.lanes.of(state).wait_idle(), 2
        )  # the turn ended without the model's answer
    finally:
        release.set()  # (a turn that was not stopped answers now)
    await asyncio.sleep(0.05)  # absence: time for a turn that was not stopped to answer
    assert not any("TOO LATE" in t for t in api.texts(ALICE))
    assert await harness.app.store.open_turn(state.session_id) is None
    history = await _history(harness)  # nothing half-written was stored; the request is closed
    assert [m.role for m in history] == ["user", "assistant"]
    assert "cancelled by the user — do not act on it" in history[1].text

    # the chat works afterwards
    api.push_text(ALICE, "hello", user_id=ALICE)
    await api.wait_for(lambda: _count(api, "Back again.") == 1)
    assert [m.text for m in harness.script.requests[-1].messages] == [
        "analyze 600519",
        history[1].text,
        "hello",
    ]


async def _slow_server(entered: asyncio.Event, release: asyncio.Event):
    async def slow(request: web.Request) -> web.Response:
        entered.set()
        await release.wait()
        return web.Response(text="slow page")

    app = web.Application()
    app.router.add_get("/slow", slow)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    return runner, f"http://127.0.0.1:{port}/slow"


async def test_cancel_during_a_slow_tool_answers_every_open_call_in_the_history(tmp_path):
    entered, release = asyncio.Event(), asyncio.Event()
    runner, url = await _slow_server(entered, release)
    h = Harness(
        tmp_path / "home",
        FakeBotAPI(),
        ScriptedClient(),
        extra_env={"TAPEBOT_TOOLS__ALLOW_PRIVATE_URLS": "true"},
    )
    # web_fetch runs (and hangs); update_plan is not concurrency-safe, so it waits behind it
    h.script.add(
        reply(
            tool_calls=[
                ("web_fetch", {"url": url}),
                ("update_plan", {"steps": [{"text": "read the page", "status": "in_progress"}]}),
            ]
        ),
        lambda req: reply("Fresh turn; history ok: " + str(len(req.messages))),
    )
    try:
        await h.start()
        api = h.api
        api.push_text(ALICE, "fetch that page", user_id=ALICE)
        await asyncio.wait_for(entered.wait(), 3)
        api.push_text(ALICE, "/cancel", user_id=ALICE)
        await api.wait_for(lambda: _count(api, "Stopped the running turn.") == 1)
        state = await _state(h)
        await asyncio.wait_for(h.app.gateway.lanes.of(state).wait_idle(), 2)

        history = await _history(h)
        answered = _all_calls_answered(history)
        assert len(answered) == 2
        for content in answered.values():
            assert "Cancelled" in json.loads(content)["error"], content
        assert all(r.is_error for m in history if m.role == "tool" for r in m.tool_results)
        assert await h.app.store.open_turn(state.session_id) is None
        assert len(h.script.requests) == 1  # the model was not asked again after the cancel

        # the next turn sends a well-formed history (every call answered) to the model
        api.push_text(ALICE, "ok, something else", user_id=ALICE)
        await api.wait_for(lambda: _count(api, "Fresh turn") == 1)
        _all_calls_answered(h.script.requests[-1].messages)
    finally:
        release.set()
        await h.stop()
        await runner.cleanup()


async def test_cancel_while_a_question_waits_closes_it(harness):
    harness.script.add(
        reply(tool_calls=[("ask_user", {"question": "Which sector?", "options": ["Banks", "Liquor"]})]),
        reply("Starting over."),
    )
    await harness.start()
    api = harness.api
    api.push_text(ALICE, "screen for me", user_id=ALICE)
    await api.wait_for(lambda: _count(api, "Which sector?") == 1)
    api.push_text(ALICE, "/cancel", user_id=ALICE)
    await api.wait_for(lambda: _count(api, "Stopped the running turn.") == 1)
    state = await _state(harness)
    assert await harness.app.store.open_turn(state.session_id) is None
    _all_calls_answered(await _history(harness))
    assert len(harness.script.requests) == 1  # cancelling does not resume the turn
    # an answer typed now is a new message, not the answer to the closed question
    api.push_text(ALICE, "Banks", user_id=ALICE)
    await api.wait_for(lambda: _count(api, "Starting over.") == 1)
    assert harness.script.requests[-1].messages[-1].text == "Banks"


async def test_cancel_with_nothing_running_says_so(harness):
    await harness.start()
    api = harness.api
    api.push_text(ALICE, "/cancel", user_id=ALICE)
    await api.wait_for(lambda: _count(api, "Nothing is running.") == 1)
    assert not any("Stopped" in t for t in api.texts(ALICE))
    assert harness.script.requests == []


# ---- /model -------------------------------------------------------------------------------------
async def test_model_command_shows_switches_and_rejects_unknown(tmp_path):
    clients = {
        name: ScriptedClient(info=ModelInfo(id=name, model=f"gpt-{name}", provider="scripted"))
        for name in ("main", "backup")
    }
    clients["main"].add(reply("answer from main"), reply("main again"))
    clients["backup"].add(reply("answer from backup"), reply("backup again"))
    h = ModelsHarness(tmp_path / "home", FakeBotAPI(), clients)
    try:
        await h.start()
        api = h.api
        api.push_text(ALICE, "/model", user_id=ALICE)
        shown = await api.wait_for(lambda: next((t for t in api.texts(ALICE) if "Model:" in t), None))
        assert shown == "Model: main. Available: main, backup. Switch with /model <id>."

        api.push_text(ALICE, "hi", user_id=ALICE)
        await api.wait_for(lambda: _count(api, "answer from main") == 1)
        assert len(clients["main"].requests) == 1 and clients["backup"].requests == []

        api.push_text(ALICE, "/model backup", user_id=ALICE)
        await api.wait_for(lambda: _count(api, "Switched this conversation to backup.") == 1)
        h.asked.clear()
        api.push_text(ALICE, "and now?", user_id=ALICE)
        await api.wait_for(lambda: _count(api, "answer from backup") == 1)
        assert "backup" in h.asked  # the runtime asked the factory for the chosen model
        assert len(clients["backup"].requests) == 1 and len(clients["main"].requests) == 1
        assert clients["backup"].requests[0].messages[-1].text == "and now?"

        api.push_text(ALICE, "/model", user_id=ALICE)
        await api.wait_for(lambda: _count(api, "Model: backup.") == 1)
        api.push_text(ALICE, "/status", user_id=ALICE)
        await api.wait_for(lambda: _count(api, "Model: backup\n") == 1)

        api.push_text(ALICE, "/model nonexistent", user_id=ALICE)
        err = await api.wait_for(lambda: next((t for t in api.texts(ALICE) if "nonexistent" in t), None))
        assert err == "No model named “nonexistent”. Available: main, backup."
        assert (await _state(h)).model == "backup"  # nothing changed
        api.push_text(ALICE, "still backup?", user_id=ALICE)
        await api.wait_for(lambda: _count(api, "backup again") == 1)
        assert len(clients["main"].requests) == 1

    finally:
        await h.stop()


async def test_model_choice_survives_a_restart(tmp_path):
    clients = {
        name: ScriptedClient(info=ModelInfo(id=name, model=f"gpt-{name}", provider="scripted"))
        for name in ("main", "backup")
    }
    clients["backup"].add(reply("backup after restart"))
    h = ModelsHarness(tmp_path / "home", FakeBotAPI(), clients)
    try:
        await h.start()
        h.api.push_text(ALICE, "/model backup", user_id=ALICE)
        await h.api.wait_for(lambda: _count(h.api, "Switched this conversation to backup.") == 1)
        await h.stop()
        await h.start()
        h.api.push_text(ALICE, "hello", user_id=ALICE)
        await h.api.wait_for(lambda: _count(h.api, "backup after restart") == 1)
        assert clients["main"].requests == []
    finally:
        await h.stop()


# ---- /lang --------------------------------------------------------------------------------------
async def test_lang_switches_the_bots_own_words(harness):
    harness.script.add(reply("ok"))
    await harness.start()
    api = harness.api
    api.push_text(ALICE, "/lang zh", user_id=ALICE)
    await api.wait_for(lambda: _count(api, "语言已切换为中文。") == 1)
    api.push_text(ALICE, "/help", user_id=ALICE)
    help_zh = await api.wait_for(lambda: next((t for t in api.texts(ALICE) if t.startswith("命令：")), None))
    assert "/cancel — 停止当前任务" in help_zh
    api.push_text(ALICE, "/status", user_id=ALICE)
    await api.wait_for(lambda: any(t.startswith("模型：") and "会话：" in t for t in api.texts(ALICE)))
    api.push_text(ALICE, "/cancel", user_id=ALICE)
    await api.wait_for(lambda: _count(api, "当前没有正在运行的任务。") == 1)
    # the model is told the preferred language too
    api.push_text(ALICE, "hi", user_id=ALICE)
    await api.wait_for(lambda: harness.script.requests)
    assert "Preferred language: Chinese" in harness.script.requests[-1].system_dynamic

    api.push_text(ALICE, "/lang fr", user_id=ALICE)
    await api.wait_for(lambda: _count(api, "用法：/lang en 或 /lang zh") == 1)
    assert (await _state(harness)).lang == "zh"  # unchanged

    api.push_text(ALICE, "/lang en", user_id=ALICE)
    await api.wait_for(lambda: _count(api, "Language set to English.") == 1)
    n_help = _count(api, "Commands:")
    api.push_text(ALICE, "/help", user_id=ALICE)
    await api.wait_for(lambda: _count(api, "Commands:") == n_help + 1)
    api.push_text(ALICE, "/lang", user_id=ALICE)
    await api.wait_for(lambda: _count(api, "Usage: /lang en or /lang zh") == 1)


async def test_lang_choice_survives_a_restart(harness):
    await harness.start()
    api = harness.api
    api.push_text(ALICE, "/lang zh", user_id=ALICE)
    await api.wait_for(lambda: _count(api, "语言已切换为中文。") == 1)
    await harness.stop()
    await harness.start()
    api.push_text(ALICE, "/help", user_id=ALICE)
    await api.wait_for(lambda: any(t.startswith("命令：") for t in api.texts(ALICE)))


# ---- update_plan --------------------------------------------------------------------------------
def _plan(steps: list[tuple[str, str]]):
    return ("update_plan", {"steps": [{"text": x, "status": s} for x, s in steps]})


async def test_plan_message_is_sent_then_edited_and_status_shows_it(harness):
    harness.script = GatedClient()
    harness.script.add(
        reply(tool_calls=[_plan([("fetch bars", "in_progress"), ("write summary", "pending")])]),
        reply(tool_calls=[_plan([("fetch bars", "done"), ("write summary", "in_progress")])]),
        reply("Plan finished."),
    )
    started, release = harness.script.hold(3)
    await harness.start()
    api = harness.api
    try:
        await _plan_shown_and_in_status(api, started)
    finally:
        release.set()
    await api.wait_for(lambda: _count(api, "Plan finished.") == 1)


async def _plan_shown_and_in_status(api: FakeBotAPI, started: asyncio.Event) -> None:
    api.push_text(ALICE, "analyze the market step by step", user_id=ALICE)
    await asyncio.wait_for(started.wait(), 3)  # the third model call: both plan updates are done

    plans = [m for m in api.sent(ALICE) if m.get("text", "").startswith("📋")]
    assert len(plans) == 1, api.texts(ALICE)  # one plan message, edited in place
    plan = plans[0]
    assert plan["text"] == "📋 Plan\n✅ fetch bars\n▶️ write summary"
    edits = [text for chat, mid, text in api.edits if (chat, mid) == (ALICE, plan["message_id"])]
    assert edits == ["📋 Plan\n✅ fetch bars\n▶️ write summary"]
    first = api.calls_to("sendMessage")
    assert any(c.params.get("text") == "📋 Plan\n▶️ fetch bars\n⬜ write summary" for c in first)

    api.push_text(ALICE, "/status", user_id=ALICE)
    status = await api.wait_for(lambda: next((t for t in api.texts(ALICE) if "Session:" in t), None))
    assert "Running: yes" in status
    assert "Plan: [done] fetch bars; [in_progress] write summary" in status


# ---- current references -------------------------------------------------------------------------
def _refs(req) -> str:
    ctx = req.context
    start = ctx.find("<current-references")
    assert start >= 0, f"no current-references block in the model's context: {ctx!r}"
    return ctx[start : ctx.index("</current-references>", start)]


async def test_current_references_reach_the_model(harness):
    seen: dict[str, Any] = {}

    def after_price(req):
        seen["result"] = json.loads(req.messages[-1].tool_results[0].content)
        return reply("Quoted.")

    harness.script.add(
        reply(tool_calls=[("get_market_price", {"code": "000858"})]),
        after_price,
        reply(tool_calls=[("read_file", {"path": "notes.txt"})]),
        reply("Read."),
    )
    await harness.start()
    api = harness.api
    api.push_text(ALICE, "analyze 600519", user_id=ALICE)
    await api.wait_for(lambda: _count(api, "Quoted.") == 1, timeout=10)
    first, second = harness.script.requests[:2]
    # what the user typed is "this" for the first call
    assert "stock=600519" in _refs(first)
    # a tool result that names another stock makes that one current
    symbol = seen["result"]["refs"]["stock"]
    assert "000858" in symbol
    assert f"stock={symbol}" in _refs(second) and "600519" not in _refs(second)

    # the next turn (no code typed) still knows "this" from the history; a tool's path is "that file"
    api.push_text(ALICE, "and what does that notes file say?", user_id=ALICE)
    await api.wait_for(lambda: _count(api, "Read.") == 1)
    third, fourth = harness.script.requests[2:4]
    assert f"stock={symbol}" in _refs(third)
    assert "file=notes.txt" in _refs(fourth) and f"stock={symbol}" in _refs(fourth)


# ---- /status ------------------------------------------------------------------------------------
async def test_status_shows_model_session_and_what_is_pending(harness):
    harness.script.add(
        reply(tool_calls=[("write_file", {"path": "w.txt", "content": "x"})]),
        reply("Skipped writing."),
        reply(tool_calls=[("ask_user", {"question": "Which horizon do you mean?", "options": ["1w"]})]),
    )
    await harness.start()
    api = harness.api

    async def status() -> str:
        n = _count(api, "Session:")
        api.push_text(ALICE, "/status", user_id=ALICE)
        await api.wait_for(lambda: _count(api, "Session:") == n + 1)
        return [t for t in api.texts(ALICE) if "Session:" in t][-1]

    idle = await status()
    state = await _state(harness)
    assert "Model: main" in idle
    assert f"Session: {state.session_id}" in idle
    assert "Messages: 0" in idle and "Running: no" in idle
    assert "Pending approvals: —" in idle and "Waiting for your answer: —" in idle

    api.push_text(ALICE, "write w.txt", user_id=ALICE)
    await api.wait_for(lambda: any("w.txt" in t for t in api.texts(ALICE)))
    turn = await harness.app.store.open_turn(state.session_id)
    approval_id = turn.waiting.confirmation_target.approval_id
    waiting = await status()
    assert f"Pending approvals: write_file ({approval_id})" in waiting
    assert "Messages: 2" in waiting
    # /status does not move on from the approval
    assert (await harness.app.store.open_turn(state.session_id)).waiting is not None

    api.push_text(ALICE, f"/deny {approval_id}", user_id=ALICE)
    await api.wait_for(lambda: _count(api, "Skipped writing.") == 1)
    api.push_text(ALICE, "how long?", user_id=ALICE)
    await api.wait_for(lambda: _count(api, "Which horizon do you mean?") == 1)
    asking = await status()
    assert "Pending approvals: —" in asking
    assert "Waiting for your answer: Which horizon do you mean?" in asking
    assert f"Session: {state.session_id}" in asking


async def test_status_after_new_shows_the_new_session(harness):
    await harness.start()
    api = harness.api
    old = (await _state_after_status(harness)).session_id
    api.push_text(ALICE, "/new", user_id=ALICE)
    await api.wait_for(lambda: _count(api, "Started a new conversation.") == 1)
    new = (await _state(harness)).session_id
    assert new != old
    api.push_text(ALICE, "/status", user_id=ALICE)
    await api.wait_for(lambda: _count(api, f"Session: {new}") == 1)


async def _state_after_status(h: Harness):
    h.api.push_text(ALICE, "/status", user_id=ALICE)
    await h.api.wait_for(lambda: _count(h.api, "Session:") == 1)
    return await _state(h)
