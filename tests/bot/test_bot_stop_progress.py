"""What a graceful stop leaves in the chat: the turn's "⏳" progress line
is edited to say it resumes after the restart, and after the restart the same message shows a
final state (a tool cut off by the stop is marked so, never left at ⏳ or "paused"). In process:
the Harness's App is stopped (the gateway's drain, as on SIGTERM) and started again on the same
home and the same fake Bot API."""

from __future__ import annotations

import asyncio

from agent.providers.scripted import ScriptedClient, reply
from bot.i18n import t
from tests.bot.conftest import ALICE, Harness
from tests.fakes.telegram_api import FakeBotAPI


def progress_of(api: FakeBotAPI, tool: str) -> dict | None:
    return next((m for m in api.sent(ALICE) if tool in m.get("text", "")), None)


async def test_a_stop_mid_tool_pauses_the_progress_line_and_the_resume_settles_it(tmp_path, monkeypatch):
    api = FakeBotAPI()
    h = Harness(
        tmp_path / "home", api, ScriptedClient([reply(tool_calls=[("read_file", {"path": "a.txt"})])])
    )
    try:
        app = await h.start()
        (h.home / "workspace").mkdir(parents=True, exist_ok=True)
        (h.home / "workspace" / "a.txt").write_text("alpha")
        tool = app.runtime.tools.get("read_file")
        started = asyncio.Event()

        async def held(ctx, arguments):  # a tool still running when the stop comes
            started.set()
            await asyncio.Event().wait()

        monkeypatch.setattr(tool, "call", held)  # the tool objects are shared: restored after
        api.push_text(ALICE, "read a.txt", user_id=ALICE)
        await asyncio.wait_for(started.wait(), 10)
        line = await api.wait_for(lambda: progress_of(api, "read_file"))
        assert line["text"].startswith("⏳")
        await h.stop()  # the grace (0.5 s) runs out: the tool is cut off
        line = api.messages[(ALICE, line["message_id"])]
        assert t("en", "progress_paused") in line["text"], line["text"]
        assert "⏳" not in line["text"]

        h.script = ScriptedClient([reply("I could not finish reading a.txt.")])
        await h.start()
        await api.wait_for(lambda: any("could not finish reading" in x for x in api.texts(ALICE)))
        final = api.messages[(ALICE, line["message_id"])]["text"]
        assert t("en", "progress_paused") not in final and "⏳" not in final, final
        assert "read_file" in final and t("en", "progress_cut_off") in final, final
        # one progress message for the turn, before and after the restart
        assert sum("read_file" in x for x in api.texts(ALICE) if not x.startswith("🔄")) == 1
    finally:
        await h.stop()


async def test_a_stop_between_steps_pauses_the_progress_line_and_the_resume_continues(tmp_path):
    """Stopped while the model thinks after a tool finished: the line says it resumes; after the
    restart it no longer says so and keeps the finished tool's ✓."""
    api = FakeBotAPI()
    h = Harness(
        tmp_path / "home", api, ScriptedClient([reply(tool_calls=[("read_file", {"path": "b.txt"})])])
    )
    try:
        await h.start()
        (h.home / "workspace").mkdir(parents=True, exist_ok=True)
        (h.home / "workspace" / "b.txt").write_text("beta")
        thinking = asyncio.Event()
        real_stream = h.script.stream

        async def stream(request):
            if h.script.requests:  # the call after the tool's result: thinks until the stop
                thinking.set()
                await asyncio.Event().wait()
            async for chunk in real_stream(request):
                yield chunk

        h.script.stream = stream  # type: ignore[method-assign]
        api.push_text(ALICE, "read b.txt", user_id=ALICE)
        await asyncio.wait_for(thinking.wait(), 10)
        line = await api.wait_for(lambda: progress_of(api, "read_file"))
        await h.stop()
        line = api.messages[(ALICE, line["message_id"])]
        assert t("en", "progress_paused") in line["text"], line["text"]
        assert line["text"].startswith("✓ read_file"), line["text"]

        h.script = ScriptedClient([reply("b.txt says beta.")])
        await h.start()
        await api.wait_for(lambda: any("b.txt says beta." in x for x in api.texts(ALICE)))
        final = api.messages[(ALICE, line["message_id"])]["text"]
        assert t("en", "progress_paused") not in final, final
        assert final.startswith("✓ read_file"), final
    finally:
        await h.stop()


async def test_a_stop_mid_stream_is_replaced_by_the_full_answer_after_the_restart(tmp_path):
    """The model was streaming when the stop came: the partial text shown says the turn resumes;
    after the restart the re-run answer replaces it in the same message, never posted twice."""
    from agent.providers.base import TextChunk

    api = FakeBotAPI()
    h = Harness(tmp_path / "home", api, ScriptedClient())
    try:
        await h.start()
        streaming = asyncio.Event()

        async def stream(request):
            h.script.requests.append(request)
            yield TextChunk("The first half of the answer, ")
            streaming.set()
            await asyncio.Event().wait()  # the rest never comes before the stop

        h.script.stream = stream  # type: ignore[method-assign]
        api.push_text(ALICE, "explain", user_id=ALICE)
        await asyncio.wait_for(streaming.wait(), 10)
        partial = await api.wait_for(lambda: progress_of(api, "The first half"), timeout=10)
        await h.stop()
        shown = api.messages[(ALICE, partial["message_id"])]["text"]
        assert "The first half" in shown and t("en", "progress_paused") in shown, shown

        h.script = ScriptedClient([reply("The first half of the answer, and the second half.")])
        await h.start()
        full = "The first half of the answer, and the second half."
        await api.wait_for(lambda: any(full in x for x in api.texts(ALICE)), timeout=10)
        assert api.messages[(ALICE, partial["message_id"])]["text"] == full
        assert sum("The first half" in x for x in api.texts(ALICE)) == 1, api.texts(ALICE)
    finally:
        await h.stop()
