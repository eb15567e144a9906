"""The agent loop: recall → compaction check → model stream → tool rounds (≤15) → done.

`AgentRuntime.run()` yields `RuntimeEvent`s; every front end renders the same stream. A turn is a
durable `TurnRecord`: messages are appended to the session as they are produced, tool calls carry
an execution status, and a turn that needs an approval or an answer is *suspended* — the chat is
released, and `resume()` continues it later, after a restart too.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Protocol

from agent import events as ev
from agent.approval import ApprovalGate, Decision, Requester, Suspend
from agent.cancel import CancelSignal, when_set
from agent.context_hooks import RECALL_CLOSE, RECALL_OPEN, ContextHooks, NoContextHooks, context_text
from agent.errors import (
    CompactionFailed,
    FatalModelError,
    ModelError,
    StorageError,
    StreamInterrupted,
    TurnNotBegun,
)
from agent.executor import BackgroundRunner, CallOutcome, ToolExecutor, TurnScope, error_outcome
from agent.guards import (
    MAX_REQUIRED_TOOL_RETRIES,
    MAX_TOOL_ROUNDS,
    DoomLoopGuard,
    missing_tool_warning,
    resolve_expectation,
    retry_message,
)
from agent.messages import Message, ThinkingPart, ToolCallPart, unanswered_calls
from agent.ports import (
    AccountDirectory,
    ApprovalRecord,
    ApprovalStatus,
    ApprovalStore,
    Clock,
    Queued,
    Receipt,
    SessionStore,
    SystemClock,
    TurnRecord,
    TurnStore,
    UsageRecord,
    UsageStore,
)
from agent.prompts import SYSTEM_PROMPT
from agent.providers.base import (
    ModelClient,
    ModelRequest,
    NoticeChunk,
    TextChunk,
    ThinkingChunk,
    ToolCallChunk,
    ToolSchema,
    UsageChunk,
)
from agent.redact import Redactor, StreamRedactor, redact_message, redact_strings
from agent.references import current_references, render_references
from agent.text import scrub
from agent.tokens import estimate_messages
from agent.tools.registry import Deps, ToolContext, Toolset
from agent.untrusted import read_outside_content
from agent.usage import Usage

log = logging.getLogger(__name__)

_CANCELLED = object()  # queued by a set cancel signal while tools run
INTERRUPTED_CALL = (
    "Interrupted by a restart while running: it may or may not have completed. "
    "It was not repeated; check the current state before trying again."
)
ROUNDS_EXHAUSTED = "(Stopped: too many tool rounds in one turn. Ask me to continue if you want more.)"
# Closes a request that got no answer, so a later turn reads it as abandoned, not as pending work
# ("buy 1000" cancelled must not be bought by the next message). Stored as the assistant's reply
# with `abandoned` in meta; the wording is for the model, which sees it in the history.
ABANDONED_NOTES = {
    "cancelled": "[Request cancelled by the user — do not act on it.",
    "failed": "[Request failed: the model provider returned an error before an answer — do not act on it.",
    "interrupted": "[Request interrupted before it finished (the program stopped) — do not act on it.",
}
ABANDONED_NOTHING_RAN = " Nothing was carried out; do it only if the user asks for it again.]"
ABANDONED_SOME_RAN = (
    " Only the tool results above were carried out; do not continue it unless the user asks again.]"
)


TRACE_PREVIEW_CHARS = 500
# how much of what earlier rounds of a turn said the next round's redaction reads first: enough for
# the longest disguise of a key (a letter-spaced or hex one) to be seen whole across the two
CONTEXT_CHARS = 512


class _RandomHex:
    """Random hex ids from one `os.urandom` read per few hundred ids: a read per turn is a
    system call that lets go of the GIL, and the event loop may then wait for a busy thread (the
    trace writer) to hand it back. Same source, same unpredictability."""

    def __init__(self, size: int = 4096) -> None:
        self.size = size
        self._pool = b""
        self._at = 0
        if hasattr(os, "register_at_fork"):  # a forked child must not repeat the parent's ids
            os.register_at_fork(after_in_child=self._forget)

    def _forget(self) -> None:
        self._pool, self._at = b"", 0

    def __call__(self, nbytes: int) -> str:
        at = self._at
        if at + nbytes > len(self._pool):
            self._pool, at = os.urandom(max(self.size, nbytes)), 0
        self._at = at + nbytes
        return self._pool[at : at + nbytes].hex()


_random_hex = _RandomHex()


class _ToolTrace:
    """Trace lines for one batch of tool calls: a `tool_result` per call (name, arguments, result
    preview, elapsed, status) and an `approval` line when one is requested. The trace redacts."""

    def __init__(self, trace: Trace, calls: list[ToolCallPart]):
        self.trace = trace
        self.arguments = {c.id: c.arguments for c in calls}
        self.started: dict[str, float] = {}

    def see(self, event: ev.RuntimeEvent) -> None:
        if isinstance(event, ev.ToolStart):
            self.started[event.call_id] = time.perf_counter()
        elif isinstance(event, ev.ToolResult):
            self._result(event.call_id, event.name, event.content, "ok", event.elapsed)
        elif isinstance(event, ev.ToolErrorEvent):
            began = self.started.get(event.call_id)
            elapsed = time.perf_counter() - began if began is not None else 0.0
            self._result(event.call_id, event.name, f"{event.code}: {event.message}", "error", elapsed)
        elif isinstance(event, ev.ApprovalRequired):
            self.trace.record(
                "approval", status="requested", approval_id=event.approval_id,
                call_id=event.call_id, tool=event.tool, arguments=event.arguments,
            )  # fmt: skip

    def _result(self, call_id: str, name: str, content: str, status: str, elapsed: float) -> None:
        preview = content if len(content) <= TRACE_PREVIEW_CHARS else content[:TRACE_PREVIEW_CHARS] + "…"
        self.trace.record(
            "tool_result", call_id=call_id, name=name, arguments=self.arguments.get(call_id),
            preview=preview, elapsed=round(elapsed, 4), status=status,
        )  # fmt: skip


class RuntimeStore(SessionStore, TurnStore, ApprovalStore, UsageStore, Protocol):
    """The storage the runtime needs; `memory.stores.SqlStore` implements all of it."""


class Trace(Protocol):
    def record(self, kind: str, **fields: Any) -> None: ...

    def close(self) -> None: ...


class _NullTrace:
    def record(self, kind: str, **fields: Any) -> None:
        return None

    def close(self) -> None:
        return None


@dataclass
class RuntimeConfig:
    max_tool_rounds: int = MAX_TOOL_ROUNDS
    max_parallel_tools: int = 5
    system_prompt: str = SYSTEM_PROMPT
    max_tokens: int = 8192


@dataclass
class TurnRequest:
    session_id: str
    text: str = ""
    who: Requester = field(default_factory=Requester)
    model: str | None = None  # a configured model id; None means the default
    system_dynamic: str = ""
    inbox: asyncio.Queue[Queued] | None = None  # messages arriving during the turn
    receipts: tuple[Receipt, ...] = ()  # of the received messages `text` is made of
    cancel: asyncio.Event | None = None
    # set when the process is stopping: the turn ends at its next durable step and stays open, to
    # be resumed after the restart (a task cancelled meanwhile leaves it open too, as a crash does)
    stop: asyncio.Event | None = None
    meta: dict[str, Any] = field(default_factory=dict)  # stored on the user message (e.g. notification)
    force_compaction: bool = False  # /compact
    # the caller read the session just now and it had no open turn: no need to read it again
    no_open_turn: bool = False
    # the caller sends the answer into a chat and then confirms it (`TurnStore.answer_sent`):
    # until then the answer is kept with the completed turn, for a restart to send
    deliver: bool = False

    def __post_init__(self) -> None:
        self.text = scrub(self.text)  # a lone surrogate would break every later turn


# How an approval ends when no approver decided it: (its status, what the model is told).
_UNDECIDED: dict[str, tuple[ApprovalStatus, str]] = {
    "no_answer": ("expired", "No answer before the approval expired; the action was not executed."),
    "moved_on": ("cancelled", "The user moved on to something else; the action was not executed."),
    "undeliverable": (
        "denied",
        "The approval request could not be delivered to anyone who may approve it; "
        "the action was not executed.",
    ),
}


class AgentRuntime:
    def __init__(
        self,
        *,
        model_for: Callable[[str | None], ModelClient],
        tools: Toolset,
        store: RuntimeStore,
        gate: ApprovalGate | None = None,
        hooks: ContextHooks | None = None,
        config: RuntimeConfig | None = None,
        deps: Deps | None = None,
        workspace: Path | None = None,
        results_dir: Path | None = None,
        trace_factory: Callable[[str, str], Trace] | None = None,
        clock: Clock | None = None,
        background: BackgroundRunner | None = None,
        spill_chars: int = 8_000,
        snapshot: Callable[[TurnRecord, str], Awaitable[str]] | None = None,
        redactor: Redactor | None = None,
    ):
        self.model_for = model_for
        self.tools = tools
        self.store = store
        self.clock = clock or SystemClock()
        self.gate = gate or ApprovalGate(store, self.clock)
        self.hooks: ContextHooks = hooks or NoContextHooks()
        self.snapshot = snapshot
        self.config = config or RuntimeConfig()
        self.deps = deps or Deps()
        self.workspace = workspace or Path.cwd()
        self.trace_factory = trace_factory or (lambda turn_id, session_id: _NullTrace())
        # Secrets never leave the loop: what the user sends is stored and shown to the
        # model masked, and the model's answer is masked before any chat or store sees it. The
        # default knows no configured values but still masks the well-known key shapes.
        self.redactor = redactor or Redactor()
        self.executor = ToolExecutor(
            toolset=tools,
            gate=self.gate,
            results_dir=results_dir,
            spill_chars=spill_chars,
            background=background,
            redact=self.redactor.text,
        )
        self._schemas_version = -1
        self._refresh_schemas()

    def _refresh_schemas(self) -> None:
        """The tool schemas sent with every call, rebuilt when the toolset changed (an MCP
        server's list_changed); compaction leaves room for them and the system prompt."""
        if self.tools.version == self._schemas_version:
            return
        self._schemas_version = self.tools.version
        self._schemas = [ToolSchema(s.name, s.description, s.parameters) for s in self.tools.specs()]
        self._tool_names = frozenset(s.name for s in self._schemas)
        self._overhead_tokens = estimate_messages([], self.config.system_prompt, self._schemas)

    # ---- public API --------------------------------------------------------------------------
    def run(self, request: TurnRequest) -> AsyncIterator[ev.RuntimeEvent]:
        """Start a turn for a new user message (nothing happens until the events are read)."""
        return self._drive(request, None)

    def resume(self, turn_id: str, request: TurnRequest | None = None) -> AsyncIterator[ev.RuntimeEvent]:
        """Continue a suspended turn (after an approval decision or an answer)."""
        return self._drive(request, turn_id)

    async def _begin(self, request: TurnRequest) -> tuple[TurnRecord, list[Message]]:
        """A new turn: close a stale open one, store the user's message (secrets masked) with
        the turn record. TurnNotBegun if storage fails on the way (the request may be run again
        as it is)."""
        try:
            return await self._begin_once(request)
        except StorageError as exc:
            raise TurnNotBegun(str(exc)) from exc

    async def _begin_once(self, request: TurnRequest) -> tuple[TurnRecord, list[Message]]:
        previous = None if request.no_open_turn else await self.store.open_turn(request.session_id)
        if previous is not None:
            await self._close_open_turn(previous)
        request.who = await self._with_account(request.who)
        turn = TurnRecord(
            id=f"t_{_random_hex(6)}",
            session_id=request.session_id,
            unattended=request.who.unattended,
            requester=request.who.user_id,
            chat_key=request.who.chat_key,
            approvers=list(request.who.approvers),
            account=request.who.account,
            created_at=self.clock.now(),
        )
        messages = await self.store.load_messages(request.session_id)
        new = [Message.user(self.redactor.text(request.text), **request.meta)] if request.text else []
        messages.extend(new)
        await self.store.commit(request.session_id, messages=new, turn=turn, received=request.receipts)
        return turn, messages

    async def _with_account(self, who: Requester) -> Requester:
        """`who` with the account its user linked (a group's turn comes with its own already)."""
        accounts = self.deps.maybe(AccountDirectory)
        if who.account or not who.user_id or accounts is None:
            return who
        platform = who.chat_key.partition(":")[0]
        account = await accounts.account_of(f"{platform}:{who.user_id}")
        return replace(who, account=account) if account else who

    async def _reopen(
        self, turn_id: str, request: TurnRequest | None
    ) -> tuple[TurnRecord, list[Message], TurnRequest] | None:
        """A suspended (or crashed) turn taken up again; None if it cannot be."""
        turn = await self.store.load_turn(turn_id)
        if turn is None or turn.status not in ("suspended", "running"):
            return None
        turn = turn.model_copy(update={"status": "running", "waiting": None})
        await self.store.save_turn(turn)
        messages = await self.store.load_messages(turn.session_id)
        who = Requester(turn.requester, turn.chat_key, tuple(turn.approvers), turn.unattended, turn.account)
        req = request or TurnRequest(session_id=turn.session_id, who=who)
        if request is not None and not request.who.user_id:
            req.who = who
        return turn, messages, req

    async def decide(
        self,
        approval_id: str,
        user_id: str,
        decision: Decision,
        note: str = "",
        receipt: Receipt | None = None,
    ) -> ApprovalRecord:
        """Record an approver's decision (raises ApprovalError when not allowed). The caller
        then `resume()`s the turn. A denial or an edit request answers the call right away.
        `receipt`: the tap, recorded as processed together with the decision."""
        record = await self.gate.decide(approval_id, user_id, decision, receipt)
        self._trace_approval(record, record.status, by=user_id, decision=decision)
        if decision in ("deny", "edit"):
            text = (
                f"The user asked for changes before running this: {note}. Propose the action again."
                if decision == "edit"
                else "The user denied this action; it was not executed."
            )
            code = "edit_requested" if decision == "edit" else "denied"
            await self._answer(record.turn_id, record.call_id, record.tool, text, code)
        return record

    async def answer(self, turn_id: str, text: str, status: str = "answered") -> None:
        """Answer the question a suspended turn is waiting on (ask_user), or close an approval
        without a human's decision: expired (`status="no_answer"`), abandoned (`"moved_on"`), or
        its card could not reach anyone who may decide (`"undeliverable"`, a denial). The caller
        resumes or not."""
        turn = await self.store.load_turn(turn_id)
        if turn is None or turn.waiting is None:
            return
        target = turn.waiting.confirmation_target
        call_id, tool = target.call_id, target.tool or "ask_user"
        if turn.waiting.kind == "approval":
            approval_id = target.approval_id
            new_status, msg = _UNDECIDED.get(status, _UNDECIDED["moved_on"])
            if not await self.store.resolve_approval(
                approval_id, status=new_status, decided_by="", decision=status
            ):
                record = await self.store.get_approval(approval_id)
                if record is not None and record.status == "approved":
                    return  # an approver allowed it first: that decision stands (resume runs it)
            else:
                closed = await self.store.get_approval(approval_id)
                if closed is not None:
                    self._trace_approval(closed, new_status, by="", decision=status)
            await self._answer(turn_id, call_id, tool, msg, status)
            return
        payload = {"status": status, "answer": text}
        await self._answer(turn_id, call_id, tool, json.dumps(payload, ensure_ascii=False), None)

    async def compact_now(self, session_id: str, model: str | None = None) -> ev.Compaction | None:
        """`/compact`: compact the session's history now, whatever its size."""
        messages = await self.store.load_messages(session_id)
        if not messages:
            return None
        result = await self.hooks.compact(
            session_id, messages, self.model_for(model), self._overhead_tokens, True
        )
        if result is None:
            return None
        new_messages, event = result
        await self.store.replace_messages(session_id, new_messages)
        return event

    async def end_session(self, session_id: str) -> None:
        """/new or /clear: let memory extract what is worth keeping from the whole session."""
        messages = await self.store.load_messages(session_id)
        if messages:
            await self.hooks.session_end(session_id, messages)

    async def close_turn(self, turn_id: str) -> None:
        """Close a suspended or stale turn, answering every open call (user moved on / crash)."""
        turn = await self.store.load_turn(turn_id)
        if turn is not None and turn.status in ("suspended", "running"):
            await self._close_open_turn(turn)

    def _trace_approval(self, record: ApprovalRecord, status: str, *, by: str, decision: str) -> None:
        """An approval decided (or closed undecided) goes into its turn's trace."""
        try:
            trace = self.trace_factory(record.turn_id, record.session_id)
            trace.record(
                "approval", status=status, approval_id=record.id, call_id=record.call_id,
                tool=record.tool, by=by, decision=decision,
            )  # fmt: skip
            trace.close()
        except Exception:  # tracing never costs a decision
            log.warning("approval %s not traced", record.id, exc_info=True)

    async def settle_interrupted(self, turn_id: str, rechecked: list[str] | None = None) -> list[str]:
        """Before resuming a turn that a stop or a crash interrupted: each call that had started
        gets a result saying it may or may not have completed, so it is never run again (calls
        that never started run on resume). An idempotent tool's call (an order: its key is
        derived from the call) runs again instead: it finds its earlier outcome by that key, or
        acts once. Returns the names of the tools that were cut off; the idempotent ones go into
        `rechecked`, if given."""
        turn = await self.store.load_turn(turn_id)
        if turn is None or turn.status != "running":
            return []
        messages = await self.store.load_messages(turn.session_id)
        fixes, names, rerun = [], [], False
        for call in unanswered_calls(messages):
            if turn.calls.get(call.id) in ("executing", "done"):  # done: its result was not stored
                if self._idempotent(call.name):
                    turn.calls[call.id] = "pending"
                    rerun = True
                    if rechecked is not None:
                        rechecked.append(call.name)
                    continue
                error = json.dumps({"error": INTERRUPTED_CALL, "code": "interrupted"})
                fixes.append(Message.tool_result(call.id, call.name, error, is_error=True))
                turn.calls[call.id] = "failed"
                names.append(call.name)
        if fixes or rerun:
            await self.store.commit(turn.session_id, messages=fixes, turn=turn)
        return names

    def _idempotent(self, name: str) -> bool:
        return name in self.tools and self.tools.get(name).spec.idempotent

    # ---- internals ---------------------------------------------------------------------------
    async def _answer(
        self, turn_id: str, call_id: str, tool: str, content: str, error_code: str | None
    ) -> None:
        turn = await self.store.load_turn(turn_id)
        if turn is None:
            return
        messages = await self.store.load_messages(turn.session_id)
        if call_id not in {c.id for c in unanswered_calls(messages)}:
            return  # already answered: a double tap or a replay changes nothing
        if error_code:
            content = json.dumps({"error": content, "code": error_code}, ensure_ascii=False)
        msg = Message.tool_result(call_id, tool, content, is_error=bool(error_code))
        await self.store.append_messages(turn.session_id, [msg])
        calls = {**turn.calls, call_id: "denied" if error_code else "done"}
        await self.store.save_turn(turn.model_copy(update={"calls": calls, "waiting": None}))

    async def _close_open_turn(self, turn: TurnRecord) -> None:
        """A new message arrived while a turn was suspended (the user moved on) or a turn was left
        running by a crash: answer every open call so the history stays well-formed."""
        if turn.status == "suspended" and turn.waiting is not None:
            await self.answer(turn.id, "", status="moved_on")
        messages = await self.store.load_messages(turn.session_id)
        fixes = []
        for call in unanswered_calls(messages):
            if turn.calls.get(call.id) in ("executing", "done"):
                text = INTERRUPTED_CALL
            else:
                text = "Not run: the turn was interrupted before this call."
            fixes.append(Message.tool_result(call.id, call.name, json.dumps({"error": text}), is_error=True))
        if turn.status != "suspended":
            messages.extend(fixes)
            fixes += self._abandoned_note(messages, "interrupted")
        if fixes:
            await self.store.append_messages(turn.session_id, fixes)
        status = "completed" if turn.status == "suspended" else "failed"
        await self.store.save_turn(turn.model_copy(update={"status": status, "waiting": None}))

    async def _drive(
        self, request: TurnRequest | None, resume_id: str | None
    ) -> AsyncIterator[ev.RuntimeEvent]:
        """The turn itself: a new one for `request`, or the suspended turn `resume_id`. (One
        generator, not a wrapper around another: every event passes through it.)"""
        started = time.perf_counter()
        self._refresh_schemas()
        fresh = resume_id is None
        if fresh:
            assert request is not None
            turn, messages = await self._begin(request)
        else:
            assert resume_id is not None
            reopened = await self._reopen(resume_id, request)
            if reopened is None:
                yield ev.ErrorEvent(f"turn {resume_id} cannot be resumed", code="not_resumable")
                return
            turn, messages, request = reopened
        trace = self.trace_factory(turn.id, turn.session_id)
        trace.record("input", text=request.text, resumed=not fresh)
        if fresh and request.text and self.redactor.text(request.text) != request.text:
            yield ev.Notice("secret_masked")  # the user is told their key was not stored
        client = self.model_for(request.model)
        usage_total, cost_total = Usage(), 0.0
        doom = DoomLoopGuard()
        expectation = resolve_expectation(messages, self._tool_names) if fresh else None
        retries, warning = 0, ""
        context_blocks: list[str] = []  # for this turn's model calls only, never stored
        if fresh and request.text:
            recalled = await self.hooks.recall(turn.session_id, request.text)
            if recalled:
                context_blocks.append(f"{RECALL_OPEN}\n{recalled}\n{RECALL_CLOSE}")
            if self.snapshot is not None:
                try:
                    snap = await self.snapshot(turn, request.text)
                except Exception:  # a snapshot is an aid; it must never cost the reply
                    log.exception("dynamic snapshot failed")
                    snap = ""
                if snap:
                    context_blocks.append(f"<dynamic-snapshot>\n{snap}\n</dynamic-snapshot>")
        cancel = request.cancel or CancelSignal()
        stop = request.stop

        def done(text: str, status: str = "completed", warning: str = "") -> ev.Done:
            elapsed = time.perf_counter() - started
            return ev.Done(text, turn.id, turn.rounds, usage_total, cost_total, elapsed, status, warning)  # type: ignore[arg-type]

        final_text = ""
        held = ""  # the end of a tool round's text that began a secret: shown with the next send
        context = ""  # the end of what earlier rounds of this turn said: a key may go on from it
        try:
            while True:
                if cancel.is_set():
                    raise asyncio.CancelledError
                if stop is not None and stop.is_set():
                    # a durable step: everything so far is stored; the restart goes on from here
                    trace.record("interrupted", rounds=turn.rounds)
                    trace.close()
                    yield done("", status="interrupted")
                    return
                pending = unanswered_calls(messages)
                if pending:
                    suspended: list[ev.RuntimeEvent] = []
                    tool_trace = _ToolTrace(trace, pending)
                    async for event in self._run_calls(
                        turn, messages, pending, request, doom, cancel, suspended
                    ):
                        tool_trace.see(event)
                        yield event
                    if suspended:
                        for event in suspended:
                            tool_trace.see(event)
                            yield event
                        trace.record(
                            "suspended",
                            waiting=turn.waiting.model_dump(mode="json") if turn.waiting else None,
                        )
                        trace.close()  # written now: the resumed turn appends to the same file
                        yield done("", status="suspended")
                        return
                if turn.rounds >= self.config.max_tool_rounds:
                    final_text = ROUNDS_EXHAUSTED
                    yield ev.TextDelta(final_text)
                    break
                if await self._drain_inbox(turn, request, messages):
                    yield ev.Notice("secret_masked")
                try:
                    compacted = await self.hooks.compact(
                        turn.session_id, messages, client, self._overhead_tokens, request.force_compaction
                    )
                except CompactionFailed as exc:  # the turn goes on with its history as it was
                    log.warning("compaction failed in session %s: %s", turn.session_id, exc)
                    compacted = None
                request.force_compaction = False
                if compacted is not None:
                    new_messages, event_c = compacted
                    messages[:] = new_messages
                    await self.store.replace_messages(turn.session_id, new_messages)
                    trace.record("compaction", before=event_c.before_messages, after=event_c.after_messages)
                    yield event_c
                turn.rounds += 1
                yield ev.ModelStart(client.info.id, turn.rounds)
                text_parts: list[str] = []
                thinking: list[ThinkingPart] = []
                calls: list[ToolCallPart] = []
                round_usage = Usage()
                refs = render_references(current_references(messages))
                req = ModelRequest(
                    messages=list(messages),
                    context=context_text([*context_blocks, refs]),
                    tools=self._schemas,
                    system=self.config.system_prompt,
                    system_dynamic=request.system_dynamic,
                    max_tokens=self.config.max_tokens,
                )
                t_model = time.perf_counter()
                shown = StreamRedactor(self.redactor, context)  # a secret split across chunks never shows
                thought = StreamRedactor(self.redactor)
                carried, held = held, ""
                if carried:
                    piece = shown.feed(carried)
                    if piece:
                        yield ev.TextDelta(piece)
                async for chunk in self._stream(client, req, cancel):
                    if isinstance(chunk, TextChunk):
                        delta = scrub(chunk.text)  # shown at once, so cleaned here, not on storing
                        text_parts.append(delta)
                        piece = shown.feed(delta)
                        if piece:
                            yield ev.TextDelta(piece)
                    elif isinstance(chunk, ThinkingChunk):
                        if thinking and thinking[-1].signature is None:
                            last = thinking[-1]
                            thinking[-1] = ThinkingPart(
                                text=last.text + chunk.text, signature=chunk.signature
                            )
                        else:
                            thinking.append(ThinkingPart(text=chunk.text, signature=chunk.signature))
                        piece = thought.feed(scrub(chunk.text))
                        if piece:
                            yield ev.ThinkingDelta(piece)
                    elif isinstance(chunk, ToolCallChunk):
                        calls.append(chunk.call)
                    elif isinstance(chunk, UsageChunk):
                        round_usage = round_usage + chunk.usage
                    elif isinstance(chunk, NoticeChunk):
                        client_id = chunk.model or client.info.id
                        notice = self.redactor.text(chunk.message)
                        yield ev.Retry(notice, chunk.reason or "fallback", model=client_id)
                        trace.record("retry", message=notice)
                rest = thought.flush()
                if rest:
                    yield ev.ThinkingDelta(rest)
                rest, held = shown.flush_holding() if calls else (shown.flush(), "")
                if rest:
                    yield ev.TextDelta(rest)
                # a held tail is stored with the next round's text, as it is shown: a secret (or
                # a disguise of one) split across two rounds is masked whole, stored as neither half
                said = carried + "".join(text_parts)
                said = said[: len(said) - len(held)]
                text = self.redactor.text_after(context, said)
                context = (context + said)[-CONTEXT_CHARS:] if calls else ""
                cost = round_usage.cost(client.info.input_per_1m, client.info.output_per_1m)
                usage_total, cost_total = usage_total + round_usage, cost_total + cost
                usage_record = UsageRecord(
                    session_id=turn.session_id,
                    turn_id=turn.id,
                    model=client.info.id,
                    usage=round_usage,
                    cost=cost,
                    created_at=self.clock.now(),
                )
                yield ev.UsageEvent(client.info.id, round_usage, cost)
                trace.record(
                    "model_call",
                    round=turn.rounds,
                    text=text,
                    calls=[c.model_dump() for c in calls],
                    thinking="".join(t.text for t in thinking),
                    elapsed=time.perf_counter() - t_model,
                    usage=round_usage.__dict__ if hasattr(round_usage, "__dict__") else str(round_usage),
                )
                thinking = [self._redact_thinking(t) for t in thinking]
                calls = [self._redact_call(c) for c in calls]
                if calls:
                    assistant = Message.assistant(text, calls, thinking)
                    messages.append(assistant)
                    turn.calls.update({c.id: "pending" for c in calls})
                    await self.store.commit(
                        turn.session_id, messages=[assistant], turn=turn, usage=usage_record
                    )
                    yield ev.ToolCalls(tuple(calls))
                    continue
                if expectation and not expectation.satisfied_by(self._turn_calls(messages, turn)):
                    if retries < MAX_REQUIRED_TOOL_RETRIES:
                        retries += 1
                        nudge = retry_message(expectation, text)
                        messages.append(Message.assistant(text or "…", internal_retry=True))
                        messages.append(Message.user(nudge, internal_retry=True))
                        await self.store.commit(turn.session_id, usage=usage_record)
                        yield ev.Retry(nudge, "required_tool", retries)
                        continue
                    warning = missing_tool_warning(expectation)
                final_text = warning + text
                assistant = Message.assistant(final_text, thinking=thinking)
                messages.append(assistant)
                turn.status = "completed"
                turn.answer = self._answer_kept(request, final_text)
                await self.store.commit(turn.session_id, messages=[assistant], turn=turn, usage=usage_record)
                break
        except asyncio.CancelledError:
            if stop is not None and stop.is_set():
                # cut off by a stop after its grace period: left open, exactly as a crash leaves
                # it (a call that had started is marked `executing`, so it is reported, not re-run)
                await self.store.save_turn(turn)
                trace.record("interrupted", rounds=turn.rounds)
                trace.close()
                raise
            await self._cancel_open_calls(turn, messages)
            await self._mark_abandoned(turn, messages, "cancelled")
            turn.status = "cancelled"
            await self.store.save_turn(turn)
            trace.record("cancelled")
            trace.close()
            yield done("", status="cancelled")
            return
        except ModelError as exc:
            # The provider's own words (which can quote a key or a request) go to the redacted
            # log and trace only; the user gets a generic message by code, in their language.
            code, message = self._model_error_text(exc)
            log.warning("model call failed in turn %s: %s: %s", turn.id, type(exc).__name__, exc)
            turn.status, turn.error = "failed", f"{type(exc).__name__}: {message}"
            await self._cancel_open_calls(turn, messages, reason="Not run: the model provider failed.")
            await self._mark_abandoned(turn, messages, "failed")
            await self.store.save_turn(turn)
            trace.record("error", message=message, detail=str(exc), error_type=type(exc).__name__)
            trace.close()
            yield ev.ErrorEvent(message, code=code)
            yield done("", status="failed")
            return
        if turn.status != "completed":  # the round limit ended the turn
            turn.status = "completed"
            turn.answer = self._answer_kept(request, final_text)
            await self.store.save_turn(turn)
        trace.record("final", text=final_text, rounds=turn.rounds)
        trace.close()
        try:
            await self.hooks.after_turn(
                turn.session_id, [m for m in messages if not m.meta.get("internal_retry")]
            )
        except Exception:  # memory upkeep must never break a reply
            log.exception("after_turn hook failed")
        yield done(final_text, warning=warning)

    def _answer_kept(self, request: TurnRequest, final_text: str) -> str | None:
        """What is kept with the completed turn until its chat has been sent it (masked, as
        everything stored is)."""
        return self.redactor.text(final_text) if request.deliver and final_text else None

    @staticmethod
    def _turn_calls(messages: list[Message], turn: TurnRecord) -> list[ToolCallPart]:
        """This turn's tool calls in order. They are at the end of the history: scanned from the
        end until all are found, so a long session costs no more than a short one."""
        found: list[ToolCallPart] = []
        wanted = len(turn.calls)
        for m in reversed(messages):
            if len(found) >= wanted:
                break
            if m.role == "assistant":
                found.extend(c for c in reversed(m.tool_calls) if c.id in turn.calls)
        found.reverse()
        return found

    async def _drain_inbox(self, turn: TurnRecord, request: TurnRequest, messages: list[Message]) -> bool:
        """Messages that arrived during the turn join the next model call, never dropped (secrets
        masked: True if any was)."""
        if request.inbox is None or request.inbox.empty():
            return False
        drained: list[Queued] = []
        while not request.inbox.empty():
            drained.append(request.inbox.get_nowait())
        new = [redact_message(q.message, self.redactor.text) for q in drained]
        masked = any(n is not q.message for n, q in zip(new, drained, strict=True))
        messages.extend(new)
        receipts = [q.receipt for q in drained if q.receipt is not None]
        await self.store.commit(turn.session_id, messages=new, received=receipts)
        return masked

    async def _stream(
        self, client: ModelClient, req: ModelRequest, cancel: asyncio.Event
    ) -> AsyncIterator[Any]:
        """The model's chunks until the stream ends or `cancel` is set. A set `cancel` interrupts
        a pending read at once (by cancelling the reading task, then taking the cancellation back
        so it reads as ours); between chunks it is checked directly. No task or wait per chunk:
        a long reply is thousands of them."""
        stream = client.stream(req)
        if cancel.is_set():
            raise asyncio.CancelledError
        reader: asyncio.Task[Any] | None = None
        interrupted = False

        def interrupt() -> None:
            nonlocal interrupted
            if reader is not None:
                interrupted = True
                reader.cancel()

        def take_back() -> None:
            # our cancellation of the reading task is not the task's own: withdraw the request
            nonlocal interrupted
            task = asyncio.current_task()
            if interrupted and task is not None and task.cancelling():
                task.uncancel()
            interrupted = False

        stop_watching = when_set(cancel, interrupt)
        try:
            iterator = stream.__aiter__()
            while True:
                if cancel.is_set():  # set while the consumer had the last chunk
                    take_back()  # (if the stream swallowed our interruption)
                    raise asyncio.CancelledError
                reader = asyncio.current_task()
                try:
                    chunk = await iterator.__anext__()
                except StopAsyncIteration:
                    return
                except asyncio.CancelledError:
                    take_back()
                    raise
                finally:
                    reader = None
                yield chunk
        finally:
            take_back()
            stop_watching()
            aclose = getattr(stream, "aclose", None)
            if aclose is not None:
                try:
                    await aclose()
                except Exception:  # noqa: BLE001 — closing a broken stream must not mask the real error
                    pass

    async def _run_calls(
        self,
        turn: TurnRecord,
        messages: list[Message],
        pending: list[ToolCallPart],
        request: TurnRequest,
        doom: DoomLoopGuard,
        cancel: asyncio.Event,
        suspended: list[ev.RuntimeEvent],
    ) -> AsyncIterator[ev.RuntimeEvent]:
        """Run the open calls of the last assistant message: doom-loop screening first, then
        batches (parallel for concurrency-safe ones), results persisted in call order."""
        queue: asyncio.Queue[Any] = asyncio.Queue()  # events, then None; or _CANCELLED
        outside = read_outside_content(messages, self.tools)

        def ctx_for(call: ToolCallPart) -> ToolContext:
            async def progress(stage: str, detail: str = "", percent: float | None = None) -> None:
                queue.put_nowait(ev.ToolProgress(call.id, call.name, stage, detail, percent))

            return ToolContext(
                call_id=call.id,
                tool_name=call.name,
                session_id=turn.session_id,
                turn_id=turn.id,
                user_id=request.who.user_id,
                chat_key=request.who.chat_key,
                account=request.who.account,
                workspace=self.workspace,
                deps=self.deps,
                unattended=request.who.unattended,
                turn=turn,
                untrusted_input=outside,
                _progress=progress,
            )

        async def mark(call_id: str, status: str) -> None:
            turn.calls[call_id] = status  # type: ignore[assignment]
            await self.store.save_turn(turn)

        scope = TurnScope(turn, request.who, mark)  # this turn's, passed with every call
        sem = asyncio.Semaphore(self.config.max_parallel_tools)

        async def one(c: ToolCallPart) -> CallOutcome:
            async with sem:
                return await self.executor.run(c, ctx_for(c), scope)

        stop = request.stop
        started: set[str] = set()  # calls begun whose results are not stored yet

        async def work() -> None:
            try:
                for i, call in enumerate(pending):
                    if doom.check(call):
                        outcomes = [
                            error_outcome(
                                call,
                                "doom_loop",
                                "doom-loop: the same call was repeated 3 times; stopped. Change approach.",
                            )
                        ]
                        outcomes += [
                            error_outcome(c, "aborted", "aborted because of a doom loop in this batch")
                            for c in pending[i + 1 :]
                        ]
                        await self._commit(turn, messages, outcomes, queue)
                        return
                for parallel, batch in self.executor.partition(pending):
                    if stop is not None and stop.is_set():
                        return  # stopping: what has not started runs after the restart
                    for call in batch:
                        started.add(call.id)
                        queue.put_nowait(ev.ToolStart(call.id, call.name, call.arguments))
                    if parallel and len(batch) > 1:
                        outcomes = list(await asyncio.gather(*(one(c) for c in batch)))
                        await self._commit(turn, messages, outcomes, queue)
                    else:
                        for call in batch:
                            try:
                                outcome = await self.executor.run(call, ctx_for(call), scope)
                            except Suspend as s:
                                await self._suspend(turn, call, s, suspended)
                                return
                            await self._commit(turn, messages, [outcome], queue)
                    if turn.plan:
                        queue.put_nowait(ev.PlanUpdate(tuple((p.text, p.status) for p in turn.plan)))
            finally:
                queue.put_nowait(None)

        task = asyncio.ensure_future(work())
        # a set `cancel` queues a marker behind the events already produced: no task per event
        stop_watching = when_set(cancel, lambda: queue.put_nowait(_CANCELLED))
        try:
            while True:
                event = await queue.get()
                if event is None:
                    break
                if event is _CANCELLED:
                    task.cancel()
                    try:
                        await task
                    except (asyncio.CancelledError, Exception):  # noqa: BLE001 — the cancelled task's own outcome does not matter; the cancellation is re-raised
                        pass
                    raise asyncio.CancelledError
                yield event
            await task  # surface unexpected errors from the batch
        except asyncio.CancelledError:
            if stop is not None and stop.is_set():
                for call_id in started:  # cut off by the stop: reported after the restart
                    if turn.calls.get(call_id) not in ("done", "failed", "denied", "cancelled"):
                        turn.calls[call_id] = "executing"
            raise
        finally:
            stop_watching()
            if not task.done():  # the turn's task was cancelled: its tools go with it
                task.cancel()
                await asyncio.gather(task, return_exceptions=True)

    async def _commit(
        self,
        turn: TurnRecord,
        messages: list[Message],
        outcomes: list[CallOutcome],
        queue: asyncio.Queue[ev.RuntimeEvent | None],
    ) -> None:
        results = [o.message for o in outcomes]
        messages.extend(results)
        for o in outcomes:
            turn.calls[o.call.id] = "done" if o.ok else "failed"
        await self.store.commit(turn.session_id, messages=results, turn=turn)
        for o in outcomes:
            if o.standing is not None:
                rule = o.standing
                queue.put_nowait(ev.StandingApprovalUsed(o.call.id, o.call.name, rule.id, rule.scope))
            queue.put_nowait(o.event)

    async def _suspend(
        self, turn: TurnRecord, call: ToolCallPart, s: Suspend, out: list[ev.RuntimeEvent]
    ) -> None:
        turn.status = "suspended"
        turn.waiting = s.waiting
        if s.approval is not None:
            turn.calls[call.id] = "awaiting_approval"
            turn.calls_approval[call.id] = s.approval.id
            out.append(ev.ApprovalRequired(s.approval.id, turn.id, call.id, call.name, call.arguments or {}))
        else:
            out.append(ev.Question(turn.id, call.id, s.waiting.question, tuple(s.waiting.options)))
        await self.store.save_turn(turn)

    async def _cancel_open_calls(
        self, turn: TurnRecord, messages: list[Message], reason: str = "Cancelled by the user before it ran."
    ) -> None:
        fixes = []
        for call in unanswered_calls(messages):
            text = (
                "Cancelled while running: it may have partially completed."
                if turn.calls.get(call.id) == "executing"
                else reason
            )
            fixes.append(Message.tool_result(call.id, call.name, json.dumps({"error": text}), is_error=True))
            turn.calls[call.id] = "cancelled"
        if fixes:
            messages.extend(fixes)
            await self.store.append_messages(turn.session_id, fixes)

    async def _mark_abandoned(self, turn: TurnRecord, messages: list[Message], kind: str) -> None:
        note = self._abandoned_note(messages, kind)
        if note:
            messages.extend(note)
            await self.store.append_messages(turn.session_id, note)

    @staticmethod
    def _abandoned_note(messages: list[Message], kind: str) -> list[Message]:
        """The note closing an unanswered request; none when the history already ends in an
        answer (a cancel that came after the reply) or holds no request."""
        if not messages or (messages[-1].role == "assistant" and not messages[-1].tool_calls):
            return []
        ran = False
        for msg in reversed(messages):
            if msg.role == "user":
                break
            ran = ran or any(not r.is_error for r in msg.tool_results)
        tail = ABANDONED_SOME_RAN if ran else ABANDONED_NOTHING_RAN
        return [Message.assistant(ABANDONED_NOTES[kind] + tail, abandoned=kind)]

    def _redact_thinking(self, part: ThinkingPart) -> ThinkingPart:
        # Signed thinking is sent back to the provider verbatim (the signature covers the text);
        # it is never shown in a chat. Unsigned thinking is masked like any text.
        if part.signature is not None:
            return part
        masked = self.redactor.text(part.text)
        return part if masked == part.text else part.model_copy(update={"text": masked})

    def _redact_call(self, call: ToolCallPart) -> ToolCallPart:
        if not call.arguments:
            return call
        masked = redact_strings(call.arguments, self.redactor.text)
        if masked == call.arguments:
            return call
        return call.model_copy(
            update={"arguments": masked, "raw_arguments": self.redactor.text(call.raw_arguments)}
        )

    @staticmethod
    def _model_error_text(exc: ModelError) -> tuple[str, str]:
        """(code, generic message): never the provider's text, which may quote a key."""
        who = f" ({exc.model})" if exc.model else ""
        if isinstance(exc, FatalModelError):
            return (
                "model_rejected",
                f"The model provider rejected the request{who}. Check the model name and API key.",
            )
        if isinstance(exc, StreamInterrupted):
            return (
                "model_interrupted",
                f"The model's answer broke off{who}, so the request was not carried out; send it again to retry.",
            )
        return (
            "model_unavailable",
            f"The model provider is unavailable{who}, so the request was not carried out; send it again shortly.",
        )
