"""`tapebot chat`: the terminal front end over the same runtime and event stream.

Interactive mode streams text to stdout, prints tool progress to stderr, and shows approval
cards with the same content as in the chats. An answer is read by the same decision function as
everywhere else (agent/consent.py): "好" or "yes" allows once, "always" grants a standing approval
where it is offered, anything else is no. Input typed while the turn was still working is
discarded before the prompt appears (the tty is flushed); only what is typed after it counts. `-m TEXT` runs one unattended turn (nobody can approve, so approval-requiring tools are
denied and the answer says so), prints the final answer on stdout and exits 0.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
import termios
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from typing import Any, Literal, TextIO

from agent import events as ev
from agent.approval import Decision, Requester
from agent.cancel import CancelSignal
from agent.consent import read_consent
from agent.errors import ApprovalError
from agent.runtime import AgentRuntime, TurnRequest
from agent.tools import sandbox
from agent.tools.workspace import LocalToolPolicy
from bot import cards
from bot.i18n import pick_language, t
from bot.progress import failure_of
from bot.signals import off_signals, on_signals
from bot.waiting import is_short_reply as short_reply  # the chats' "short unclear reply" rule, shared

TERMINAL_USER = "terminal"
#: The terminal is one chat for its user, like a DM: its standing approvals ("Always allow") and
#: `/rules` outlive a session (/new, a new `tapebot chat`). Sessions stay "terminal:<name>".
TERMINAL_CHAT_KEY = "terminal"

#: The terminal's own words around a card (the chats' say "tap a button", "reply to this card").
TERMINAL_STRINGS: dict[str, dict[str, str]] = {
    "en": {
        "hint": "Type yes or no; a longer message is a new request (the card closes unrun).",
        "hint_always": "Type yes, always or no; a longer message is a new request (the card closes unrun).",
        "unclear": "not an answer: type yes or no",
        "unclear_always": "not an answer: type yes, always or no",
        "prompt": "Allow {tool}? [yes] once / [no]: ",
        "prompt_always": "Allow {tool}? [yes] once / [always] / [no]: ",
        "moved_on": "Your message is the next request; nothing was run.",
        "interrupted": "Ctrl-C: {tool} denied; nothing was run",
        "you": "you",
    },
    "zh": {
        "hint": "输入“好”或“不”；较长的消息视为新的请求（卡片关闭，不执行）。",
        "hint_always": "输入“好”、“总是允许”或“不”；较长的消息视为新的请求（卡片关闭，不执行）。",
        "unclear": "这不是回答：请输入“好”或“不”",
        "unclear_always": "这不是回答：请输入“好”、“总是允许”或“不”",
        "prompt": "允许 {tool}？[好] 一次 / [不]：",
        "prompt_always": "允许 {tool}？[好] 一次 / [总是允许] / [不]：",
        "moved_on": "你的消息将作为新的请求；未执行任何操作。",
        "interrupted": "Ctrl-C：已拒绝 {tool}；未执行任何操作",
        "you": "你",
    },
}
_OUTCOME_KEYS = {
    "once": "approved_by",
    "always": "approved_always_by",
    "deny": "denied_by",
    "edit": "edit_by",
}


def tt(lang: str, key: str, **kw: Any) -> str:
    text = TERMINAL_STRINGS.get(lang, TERMINAL_STRINGS["en"])[key]
    return text.format(**kw) if kw else text


def terminal_language(settings: Any) -> str:
    """`[agent] language`; "auto" follows the shell's locale (LANG=zh_CN.UTF-8 → zh)."""
    configured = getattr(getattr(settings, "agent", None), "language", "auto") or "auto"
    if configured == "auto":
        configured = os.environ.get("LC_ALL") or os.environ.get("LANG") or "en"
    return pick_language(configured)


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


async def _drive(
    runtime: AgentRuntime,
    events_iter: Any,
    renderer: TerminalRenderer,
    ask: Any,
    who: Requester,
    facts: Any = None,
    carry: list[str] | None = None,
    on_interrupt: Callable[[], object] | None = None,
) -> ev.Done | None:
    """Consume a turn, answering approvals and questions interactively, until it ends. A longer
    message typed at a card is a new request, as in the chats: the card closes unrun ("moved on")
    and the message goes to `carry`, for the caller to run as the next turn."""
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
            moved_on = await _decide_in_terminal(runtime, pending, renderer, ask, who, facts, on_interrupt)
            if moved_on is not None:
                await runtime.answer(pending.turn_id, "", status="moved_on")
                await runtime.close_turn(pending.turn_id)
                renderer.note(f"{t(renderer.lang, 'moved_on')} — {tt(renderer.lang, 'moved_on')}")
                if carry is not None:
                    carry.append(moved_on)
                return done
        else:
            options = "".join(f"\n  {i}. {o}" for i, o in enumerate(pending.options, 1))
            reply = (await ask(f"\n{pending.question}{options}\n> ", fresh=True)).strip()
            if pending.options and reply.isdigit() and 1 <= int(reply) <= len(pending.options):
                reply = pending.options[int(reply) - 1]
            await runtime.answer(pending.turn_id, reply)
        events_iter = runtime.resume(pending.turn_id)


def _sandbox_note(runtime: AgentRuntime, tool: str) -> str:
    """exec_command's card says what its sandbox allows, as in the chats."""
    policy = runtime.deps.maybe(LocalToolPolicy)
    return sandbox.describe(policy) if tool == "exec_command" and policy is not None else ""


def read_card_reply(reply: str, scope: Any) -> Decision | Literal["moved_on", "unclear"]:
    """A line typed at a card, read as the chats read it: a decision only through
    agent/consent.read_consent; silence is a no; a longer message (or a command such as /exit,
    /new) is a new request that closes the card unrun; a short unclear reply gets a hint."""
    word = read_consent("text", reply, scope=scope).gate_decision
    if word is not None:
        return word
    if not reply.strip():
        return "deny"
    if reply.strip().startswith("/") or not short_reply(reply):
        return "moved_on"
    return "unclear"


async def _decide_in_terminal(
    runtime: AgentRuntime, pending: ev.ApprovalRequired, renderer: TerminalRenderer, ask: Any,
    who: Requester, facts: Any = None, on_interrupt: Callable[[], object] | None = None,
) -> str | None:  # fmt: skip
    """Show the card and read the answer through agent/consent.read_consent, as the chats do: a
    decision is recorded; a short unclear reply gets a hint and the card stays; a longer message
    is returned undecided (the caller closes the card as "moved on"). Silence (end of input, an
    empty line) is a no."""
    record = await runtime.store.get_approval(pending.approval_id)
    if record is None:
        renderer.note("this approval is gone; nothing was executed")
        return None
    scope = runtime.gate.scope_for(record)
    trade = await facts(record) if facts is not None else None
    info = cards.CardInfo(
        expires_at=record.expires_at,
        scope=scope,
        standing_hours=runtime.gate.standing_ttl.total_seconds() / 3600,
        trade=trade,
        note=_sandbox_note(runtime, record.tool),
    )
    lang, always = renderer.lang, "_always" if scope is not None else ""
    text, _ = cards.approval_card(record, lang, info)
    # the chat card's last line ("tap a button", "reply to this card") becomes the terminal's own
    card = cards.plain(text).removesuffix(t(lang, "approval_hint")).rstrip()
    ask_again = tt(lang, "prompt" + always, tool=record.tool)
    prompt = f"\n{card}\n{tt(lang, 'hint' + always)}\n{ask_again}"
    hint = tt(lang, "unclear" + always)
    word: Decision | None = None
    while True:
        reply = await _interruptible(ask(prompt, fresh=True), on_interrupt)
        if reply is None:  # Ctrl-C at the prompt: a no, said as such (not a re-prompt)
            renderer.note(tt(lang, "interrupted", tool=record.tool))
            break
        reading = read_card_reply(reply, scope)
        if reading == "moved_on":
            return reply.strip()
        if reading != "unclear":
            word = reading
            break
        renderer.note(hint)
        prompt = ask_again
    try:
        await runtime.decide(pending.approval_id, who.user_id, word or "deny")
    except ApprovalError as exc:
        renderer.note(str(exc))
        return None
    rule = ""
    if word == "always":  # the chat card's closing line names the new standing approval
        rules = await runtime.store.list_standing(record.chat_key, datetime.now(UTC), record.tool)
        rule = next((r.id for r in rules if r.approval_id == record.id), "")
    renderer.note(t(lang, _OUTCOME_KEYS[word or "deny"], who=tt(lang, "you"), rule=rule))
    return None


async def _interruptible(reading: Awaitable[str], on_interrupt: Callable[[], object] | None) -> str | None:
    """The answer to a card, or None on Ctrl-C. While the prompt waits, Ctrl-C is the prompt's;
    then it goes back to `on_interrupt` (the turn's cancel) or to Python's default."""
    loop = asyncio.get_running_loop()
    interrupted: asyncio.Future[None] = loop.create_future()
    task = asyncio.ensure_future(reading)

    def interrupt() -> None:
        if not interrupted.done():
            interrupted.set_result(None)

    on_signals((signal.SIGINT,), interrupt)
    try:
        waiting: set[asyncio.Future[Any]] = {task, interrupted}
        await asyncio.wait(waiting, return_when=asyncio.FIRST_COMPLETED)
    finally:
        off_signals((signal.SIGINT,))
        if on_interrupt is not None:
            on_signals((signal.SIGINT,), on_interrupt)
    if task.done():
        return task.result()
    task.cancel()  # the read itself stays for the next prompt (see _ask_line)
    return None


def flush_typed_ahead(stream: Any) -> None:
    """Discard what was typed before a prompt appeared (a tty only: piped input is a script)."""
    try:
        if stream.isatty():
            termios.tcflush(stream.fileno(), termios.TCIFLUSH)
    except (OSError, ValueError, termios.error):
        pass


#: The one read of stdin in progress. A prompt given up (Ctrl-C at a card, a background report
#: taking over "you>") leaves its thread blocked in input(); the next prompt takes over that read
#: rather than start a second reader that would race it for the next line.
_reading: asyncio.Future[str | None] | None = None


def _read_line(prompt: str) -> str | None:
    try:
        return input(prompt)
    except EOFError:
        return None  # Ctrl-D, or the end of piped input


async def _ask_line(prompt: str, fresh: bool = False) -> str | None:
    """One line from the user, None at end of input; `fresh`: only what is typed after the
    prompt (approvals)."""
    global _reading
    if fresh:
        flush_typed_ahead(sys.stdin)
    if _reading is None:
        _reading = asyncio.ensure_future(asyncio.to_thread(_read_line, prompt))
    else:
        sys.stdout.write(prompt)
        sys.stdout.flush()
    reading = _reading
    line = await asyncio.shield(reading)  # cancelling this prompt leaves the read to the next
    if _reading is reading:
        _reading = None
    return line


async def _ask(prompt: str, fresh: bool = False) -> str:
    """One line from the user; end of input reads as an empty line (silence: a no)."""
    return (await _ask_line(prompt, fresh)) or ""


def session_id_for(name: str | None) -> str:
    return f"terminal:{name}" if name else f"terminal:{datetime.now().astimezone().strftime('%Y%m%d-%H%M%S')}"


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
    carry: list[str] | None = None,
) -> ev.Done | None:
    """A background task finished: a system notification wakes a turn that reports it."""
    from agent.background_tools import task_notification_text

    text = "\n\n".join(task_notification_text(r) for r in records)
    for r in records:
        renderer.note(f"background task {r.id} ({r.tool_name}) {r.status}")
    req = _request(app, session, text, who, model, meta={"notification": True})
    return await _drive(app.runtime, app.runtime.run(req), renderer, ask, who, app.trade_facts, carry)


async def one_shot(app: Any, session: str, text: str, model: str | None, notices: asyncio.Queue[Any]) -> int:
    runtime: AgentRuntime = app.runtime
    who = Requester(TERMINAL_USER, TERMINAL_CHAT_KEY, (), unattended=True)
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
    # the session ends with the process: memory extraction runs now (the stop drains it)
    await runtime.end_session(session)
    return 0


async def repl(app: Any, session: str, model: str | None, notices: asyncio.Queue[Any]) -> int:
    runtime: AgentRuntime = app.runtime
    renderer = TerminalRenderer(sys.stdout, sys.stderr, lang=terminal_language(app.settings))
    who = Requester(TERMINAL_USER, TERMINAL_CHAT_KEY, (TERMINAL_USER,))
    sys.stderr.write(
        f"tapebot — model {app.default_model_id}, session {session}. "
        "Ctrl-C stops a running turn, Ctrl-D or /exit quits, /new starts a new session, "
        "/rules lists standing approvals.\n"
    )
    pending_input: asyncio.Future[str | None] | None = None
    carry: list[str] = []  # a message typed at a card that moved on: the next request
    while True:
        if carry and pending_input is None:
            pending_input = asyncio.get_running_loop().create_future()
            pending_input.set_result(carry.pop(0))
        if pending_input is None:
            pending_input = asyncio.ensure_future(_ask_line("\nyou> "))
        notice = asyncio.ensure_future(notices.get())
        done, _ = await asyncio.wait({pending_input, notice}, return_when=asyncio.FIRST_COMPLETED)
        if notice in done:
            records = [notice.result()] + [notices.get_nowait() for _ in range(notices.qsize())]
            if not pending_input.done():
                pending_input.cancel()  # the report's prompts take over the read (see _ask_line)
                pending_input = None
            await _report_tasks(app, session, records, who, model, renderer, _ask, carry)
            continue
        notice.cancel()
        line = pending_input.result()
        pending_input = None
        if line is None:
            # stdin is exhausted: let background work of this session finish and report first
            if await _drain_background(app, session, notices, who, model, renderer):
                continue
            return 0
        text = line.strip()
        if not text:
            continue
        if text in ("/exit", "/quit"):
            return 0
        if text == "/rules" or text.startswith("/rules "):
            from bot.rules import rules_command

            renderer.note(
                await rules_command(app.store, TERMINAL_CHAT_KEY, text[len("/rules") :], renderer.lang)
            )
            continue
        if text == "/new":
            await runtime.end_session(session)
            session = session_id_for(None)
            who = Requester(TERMINAL_USER, TERMINAL_CHAT_KEY, (TERMINAL_USER,))
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
                app.trade_facts,
                carry,
                cancel.set,
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
