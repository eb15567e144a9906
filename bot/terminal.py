"""`tapebot chat`: the terminal front end over the same runtime and event stream.

Interactive mode streams text to stdout, prints tool progress to stderr, and asks y/N for
approvals. `-m TEXT` runs one unattended turn (nobody can approve, so approval-requiring tools are
denied and the answer says so), prints the final answer on stdout and exits 0.
"""

from __future__ import annotations

import asyncio
import json
import signal
import sys
from datetime import datetime
from typing import Any, TextIO

from agent import events as ev
from agent.approval import Requester
from agent.cancel import CancelSignal
from agent.errors import ApprovalError
from agent.runtime import AgentRuntime, TurnRequest
from bot.signals import off_signals, on_signals

TERMINAL_USER = "terminal"


def _short(value: Any, limit: int = 120) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)
    text = text.replace("\n", " ")
    return text if len(text) <= limit else text[: limit - 1] + "…"


class TerminalRenderer:
    """Renders runtime events: answer text on `out`, everything else on `err`."""

    def __init__(self, out: TextIO, err: TextIO, stream_text: bool = True):
        self.out, self.err, self.stream_text = out, err, stream_text
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
                self.note(f"{name} ✓ {elapsed:.2f}s {_short(content, 80)}")
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


async def _drive(
    runtime: AgentRuntime,
    events_iter: Any,
    renderer: TerminalRenderer,
    ask: Any,
    who: Requester,
) -> ev.Done | None:
    """Consume a turn, answering approvals and questions interactively, until it ends."""
    done: ev.Done | None = None
    while True:
        pending: ev.ApprovalRequired | ev.Question | None = None
        async for event in events_iter:
            renderer.render(event)
            if isinstance(event, (ev.ApprovalRequired, ev.Question)):
                pending = event
            if isinstance(event, ev.Done):
                done = event
        if pending is None or ask is None:
            return done
        if isinstance(pending, ev.ApprovalRequired):
            args = json.dumps(pending.arguments, ensure_ascii=False, indent=1)
            reply = (
                (await ask(f"\nAllow {pending.tool}({args})? [y]es once / [a]lways / [N]o: ")).strip().lower()
            )
            decision = {"y": "once", "yes": "once", "a": "always", "always": "always"}.get(reply, "deny")
            try:
                await runtime.decide(pending.approval_id, who.user_id, decision)  # type: ignore[arg-type]
            except ApprovalError as exc:
                renderer.note(str(exc))
        else:
            options = "".join(f"\n  {i}. {o}" for i, o in enumerate(pending.options, 1))
            reply = (await ask(f"\n{pending.question}{options}\n> ")).strip()
            if pending.options and reply.isdigit() and 1 <= int(reply) <= len(pending.options):
                reply = pending.options[int(reply) - 1]
            await runtime.answer(pending.turn_id, reply)
        events_iter = runtime.resume(pending.turn_id)


async def _ask(prompt: str) -> str:
    try:
        return await asyncio.to_thread(input, prompt)
    except EOFError:
        return ""


def session_id_for(name: str | None) -> str:
    return f"terminal:{name}" if name else f"terminal:{datetime.now().strftime('%Y%m%d-%H%M%S')}"


async def run_chat(args: Any, settings: Any) -> int:
    from bot.app import App

    app = App(settings)
    await app.start(adapters=False)
    notices: asyncio.Queue[Any] = asyncio.Queue()

    async def on_task(record: Any) -> None:
        await notices.put(record)

    app.task_listeners.append(on_task)
    try:
        session = session_id_for(getattr(args, "session", None))
        model = getattr(args, "model", None)
        if getattr(args, "message", None):
            return await one_shot(app, session, args.message, model, notices)
        return await repl(app, session, model, notices)
    finally:
        await app.stop()


def _request(app: Any, session: str, text: str, who: Requester, model: str | None, **kw: Any) -> TurnRequest:
    return TurnRequest(session, text, who, model=model, system_dynamic=app.system_dynamic(), **kw)


async def _report_tasks(
    app: Any,
    session: str,
    records: list[Any],
    who: Requester,
    model: str | None,
    renderer: TerminalRenderer,
    ask: Any,
) -> ev.Done | None:
    """A background task finished: a system notification wakes a turn that reports it."""
    from agent.background_tools import task_notification_text

    text = "\n\n".join(task_notification_text(r) for r in records)
    for r in records:
        renderer.note(f"background task {r.id} ({r.tool_name}) {r.status}")
    req = _request(app, session, text, who, model, meta={"notification": True})
    return await _drive(app.runtime, app.runtime.run(req), renderer, ask, who)


async def one_shot(app: Any, session: str, text: str, model: str | None, notices: asyncio.Queue[Any]) -> int:
    runtime: AgentRuntime = app.runtime
    who = Requester(TERMINAL_USER, session, (), unattended=True)
    renderer = TerminalRenderer(sys.stderr, sys.stderr, stream_text=False)
    done = await _drive(runtime, runtime.run(_request(app, session, text, who, model)), renderer, None, who)
    if done is None or done.status == "failed":
        return 1
    print(done.text)
    # background work started by this turn: wait for it, then report it, before exiting
    pending = [r for r in await app.task_manager.list(session) if not r.terminal]
    for record in pending:
        renderer.note(f"waiting for background task {record.id} ({record.tool_name})…")
        await app.task_manager.wait(record.id)
    finished = [notices.get_nowait() for _ in range(notices.qsize())]
    if finished:
        report = await _report_tasks(app, session, finished, who, model, renderer, None)
        if report is not None and report.text:
            print(report.text)
    return 0


async def repl(app: Any, session: str, model: str | None, notices: asyncio.Queue[Any]) -> int:
    runtime: AgentRuntime = app.runtime
    renderer = TerminalRenderer(sys.stdout, sys.stderr)
    who = Requester(TERMINAL_USER, session, (TERMINAL_USER,))
    sys.stderr.write(
        f"tapebot — model {app.default_model_id}, session {session}. "
        "Ctrl-C stops a running turn, Ctrl-D or /exit quits, /new starts a new session.\n"
    )
    pending_input: asyncio.Future[str] | None = None
    while True:
        if pending_input is None:
            pending_input = asyncio.ensure_future(_ask("\nyou> "))
        notice = asyncio.ensure_future(notices.get())
        done, _ = await asyncio.wait({pending_input, notice}, return_when=asyncio.FIRST_COMPLETED)
        if notice in done:
            records = [notice.result()] + [notices.get_nowait() for _ in range(notices.qsize())]
            await _report_tasks(app, session, records, who, model, renderer, _ask)
            continue
        notice.cancel()
        line = pending_input.result()
        pending_input = None
        if line == "" and not sys.stdin.isatty():
            # stdin is exhausted: let background work of this session finish and report first
            if await _drain_background(app, session, notices, who, model, renderer):
                continue
            return 0
        text = line.strip()
        if not text:
            continue
        if text in ("/exit", "/quit"):
            return 0
        if text == "/new":
            await runtime.end_session(session)
            session = session_id_for(None)
            who = Requester(TERMINAL_USER, session, (TERMINAL_USER,))
            renderer.note(f"new session {session}")
            continue
        cancel = CancelSignal()
        on_signals((signal.SIGINT,), cancel.set)
        try:
            await _drive(
                runtime,
                runtime.run(_request(app, session, text, who, model, cancel=cancel)),
                renderer,
                _ask,
                who,
            )
        finally:
            off_signals((signal.SIGINT,))


async def _drain_background(
    app: Any,
    session: str,
    notices: asyncio.Queue[Any],
    who: Requester,
    model: str | None,
    renderer: TerminalRenderer,
) -> bool:
    pending = [r for r in await app.task_manager.list(session) if not r.terminal]
    for record in pending:
        await app.task_manager.wait(record.id)
    if notices.empty():
        return False
    records = [notices.get_nowait() for _ in range(notices.qsize())]
    await _report_tasks(app, session, records, who, model, renderer, _ask)
    return False
