"""`tapebot chat`: the terminal front end.

Interactive, it is a chat like Telegram and Discord: the console adapter (adapters/console.py)
attached to the gateway (bot/console_chat.py), with the same consent, commands and task notices.

`-m TEXT` runs one unattended turn (nobody can approve, so approval-requiring tools are denied and
the answer says so), prints the final answer on stdout, waits for background work it started and
reports it, and exits 0. It drives the runtime directly: nothing waits on a user, so the gateway
(and the console's rich rendering and line editing) would only add start-up time.
"""

from __future__ import annotations

import json
import sys
from datetime import datetime
from typing import Any, TextIO

from agent import AgentRuntime, Requester, TurnRequest
from agent import events as ev

#: The one-shot acts as the interactive terminal's user in its chat (bot/console_chat.py
#: TERMINAL_USER, TERMINAL_CHAT.key; not imported from there: the one-shot stays light).
TERMINAL_USER = "terminal"
TERMINAL_CHAT_KEY = "terminal"


def _short(value: Any, limit: int = 120) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)
    text = text.replace("\n", " ")
    return text if len(text) <= limit else text[: limit - 1] + "…"


class TerminalRenderer:
    """Renders runtime events: answer text on `out`, everything else on `err`."""

    def __init__(self, out: TextIO, err: TextIO, stream_text: bool = True, lang: str = "en"):
        self.out, self.err, self.stream_text, self.lang = out, err, stream_text, lang
        self._midline = False

    def note(self, text: str) -> None:
        if self._midline:
            self.out.write("\n")
            self.out.flush()
            self._midline = False
        self.err.write(f"  · {text}\n")
        self.err.flush()

    def render(self, event: ev.RuntimeEvent) -> None:
        match event:
            case ev.TextDelta(text=text) if self.stream_text:
                self.out.write(text)
                self.out.flush()
                self._midline = not text.endswith("\n")
            case ev.ToolStart(name=name, arguments=args):
                self.note(f"{name}({_short(args or {}, 80)})")
            case ev.ToolProgress(name=name, stage=stage, detail=detail, percent=pct):
                pct_text = f" {pct:.0f}%" if pct is not None else ""
                self.note(f"{name}: {stage}{pct_text} {detail}".rstrip())
            case ev.ToolResult(name=name, content=content, elapsed=elapsed, attachments=atts):
                # on use: bot.progress brings the chat adapters' types a one-shot otherwise skips
                from bot.progress import failure_of

                failure = failure_of(content)  # "rejected", "failed", …: ✗ as in the chats
                mark = f"✗ {failure}" if failure else "✓"
                self.note(f"{name} {mark} {elapsed:.2f}s {_short(content, 80)}")
                for att in atts:
                    self.note(f"saved {getattr(att, 'path', att)}")
            case ev.ToolErrorEvent(name=name, message=message):
                self.note(f"{name} ✗ {_short(message, 160)}")
            case ev.Retry(message=message):
                self.note(f"retry: {_short(message, 160)}")
            case ev.Compaction(before_messages=b, after_messages=a):
                self.note(f"context compacted ({b} → {a} messages)")
            case ev.PlanUpdate(steps=steps):
                marks = {"done": "✓", "in_progress": "▸", "skipped": "–"}
                self.note("plan: " + "; ".join(f"{marks.get(s, '○')} {t}" for t, s in steps))
            case ev.ErrorEvent(message=message):
                self.note(f"error: {message}")
            case ev.Notice(code="secret_masked"):
                self.note(
                    "a key-like value in your message was masked: it was not stored or sent to the model"
                )
            case ev.Done():
                if self._midline:
                    self.out.write("\n")
                    self.out.flush()
                    self._midline = False


def session_id_for(name: str | None) -> str:
    """`--session NAME` → "terminal:NAME"; otherwise a session of this run's own."""
    return f"terminal:{name}" if name else f"terminal:{datetime.now().astimezone().strftime('%Y%m%d-%H%M%S')}"


async def run_chat(args: Any, settings: Any) -> int:
    from bot.app import App

    app = App(settings)
    session = session_id_for(getattr(args, "session", None))
    if not getattr(args, "message", None):
        from bot.console_chat import run_console

        try:
            return await run_console(app, session, getattr(args, "model", None))
        finally:
            await app.stop()
    await app.start(adapters=False)
    finished: list[Any] = []

    async def on_task(record: Any) -> None:
        finished.append(record)

    app.task_listeners.append(on_task)
    try:
        return await one_shot(app, session, args.message, getattr(args, "model", None), finished)
    finally:
        await app.stop()


async def _run(app: Any, request: TurnRequest, renderer: TerminalRenderer) -> ev.Done | None:
    done: ev.Done | None = None
    async for event in app.runtime.run(request):
        renderer.render(event)
        if isinstance(event, ev.Done):
            done = event
    return done


async def one_shot(app: Any, session: str, text: str, model: str | None, finished: list[Any]) -> int:
    runtime: AgentRuntime = app.runtime
    who = Requester(TERMINAL_USER, TERMINAL_CHAT_KEY, (), unattended=True)
    renderer = TerminalRenderer(sys.stderr, sys.stderr, stream_text=False)

    def request(text: str, **kw: Any) -> TurnRequest:
        return TurnRequest(session, text, who, model=model, system_dynamic=app.system_dynamic(), **kw)

    done = await _run(app, request(text), renderer)
    if done is None or done.status == "failed":
        return 1
    print(done.text)
    # background work started by this turn: wait for it, then report it, before exiting
    for record in [r for r in await app.task_manager.list(session) if not r.terminal]:
        renderer.note(f"waiting for background task {record.id} ({record.tool_name})…")
        await app.task_manager.wait(record.id)
    if finished:
        from agent.background_tools import task_notification_text

        for r in finished:
            renderer.note(f"background task {r.id} ({r.tool_name}) {r.status}")
        notice = "\n\n".join(task_notification_text(r) for r in finished)
        report = await _run(app, request(notice, meta={"notification": True}), renderer)
        if report is not None and report.text:
            print(report.text)
    # the session ends with the process: memory extraction runs now (the stop drains it)
    await runtime.end_session(session)
    return 0
