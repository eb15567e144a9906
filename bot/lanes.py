"""One lane per chat: everything that runs a turn in a chat goes through its lane, one at a time —
the user's messages, skills, scheduled briefs, background-task notices and resumed turns. Chats
run in parallel.

A message that arrives while a turn runs is folded into its next model call; anything left when
it ends starts the next turn — nothing is dropped. Messages that wait on an approval only an
approver can give are held until it is decided. A task notice waits for the user's turn to end,
then gets a turn of its own. A turn answered or decided while the lane runs is resumed by the lane
itself, never as a second turn at once. A message folded in while the turn was delivering the card
or question it then stopped at (an instant reply) is read against it once the turn has suspended,
as if it had arrived a moment later — never parked until the card expires.

The lane's state (running, the queue, what is held, what to resume) is its own: callers use its
methods.

Across replicas (several processes on one PostgreSQL database), a lane runs only while its replica
holds the chat (`LaneDeps.chat_lock`, a lease row in the database: bot/replicas.py): the lane of
the same chat on another replica waits. The chat is not given back when a turn ends: the lane
reports that it is idle (`LaneRouter.lane_idle`) and the router lets the chat go once nothing of it
waits. On SQLite (one process) there is no lock: the in-process lane is the only one."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AbstractAsyncContextManager, nullcontext
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Protocol

from adapters.base import ChatRef, DeliveryError, InboundMessage, UserRef
from agent import events as ev
from agent.approval import Requester
from agent.cancel import CancelSignal
from agent.messages import Message
from agent.ports import Queued, Receipt, TurnRecord
from agent.runtime import AgentRuntime, TurnRequest
from bot.chat_output import ChatOutput
from bot.chats import ChatState, group_account
from bot.day_header import DayHeader
from bot.delivery import render_all
from bot.i18n import t

log = logging.getLogger(__name__)

Events = AsyncIterator[ev.RuntimeEvent]


@dataclass(frozen=True, slots=True)
class Folded(Queued):
    """A user's message folded into a running turn, with the message as it arrived: if that turn
    stops at a card or question instead, the router reads it again (`LaneRouter.on_message`)."""

    inbound: InboundMessage | None = None


class ChatLock(Protocol):
    def hold(self, chat_key: str) -> AbstractAsyncContextManager[None]:
        """Held while the chat's lane runs: no other replica runs a turn in that chat meanwhile."""
        ...

    async def take(self, chat_key: str) -> bool:
        """Hold the chat here now if no other live replica does; False when one does."""
        ...

    def taken_over(self, chat_key: str) -> bool:
        """Once: the chat was taken from a replica that died holding it."""
        ...


class LaneRouter(Protocol):
    """The router's side of a lane (bot/gateway.py): a lane reads messages and reports idleness
    back to the router that owns the replica leases and the message path."""

    async def on_message(self, state: ChatState, msg: InboundMessage, receipt: Receipt | None) -> None:
        """What the turn's card or question makes of a message that reached the lane while it was
        being delivered: read it again, the router's usual way."""
        ...

    def lane_idle(self, state: ChatState) -> None:
        """The lane has nothing left to run: the chat may be let go (replicas)."""
        ...


class Approvers(Protocol):
    def approvers_for(self, chat: ChatRef, user: UserRef) -> tuple[str, ...]: ...


class OpenTurns(Protocol):
    async def open_turn(self, session_id: str) -> TurnRecord | None: ...


class TurnStart(Protocol):
    """A turn's first write, retried while storage fails (bot/retry.py)."""

    def begun(
        self,
        state: ChatState,
        run: Callable[[], Events],
        say: Callable[[ChatState, str], Awaitable[Any]],
        stop: CancelSignal,
        text: str,
    ) -> Events: ...


def is_waiting(turn: TurnRecord | None) -> bool:
    """A suspended turn waiting on the user (an approval card or a question)."""
    return turn is not None and turn.status == "suspended" and turn.waiting is not None


@dataclass
class LaneDeps:
    """What a lane needs from the rest of the bot (bot/gateway.py wires it): collaborators, each
    an object with its own job."""

    runtime: AgentRuntime
    output: ChatOutput  # the chats: say, how a turn is shown, the tasks a lane starts
    router: LaneRouter
    turns: OpenTurns  # what the chat waits on, read from the store
    patience: TurnStart
    approvers: Approvers
    header: DayHeader  # the system prompt's dynamic part
    stop: CancelSignal  # set by drain(): turns end at their next durable step; queued work waits
    chat_lock: ChatLock | None = None  # across replicas; None: this process is the only one
    # set once the restart's recovery has run: a turn it resumes waits for it, so the messages it
    # takes up (queued behind that turn at the stop or crash) join the turn rather than follow it
    recovered: asyncio.Event | None = None


class Lane:
    """A chat's lane. Its public methods are what commands, waiting, notices and the router use:
    one submit method per kind of work (message, notice, skill, brief, resume) plus the few
    queries and controls (is_running, cancel, hold, release_held) — about twenty methods, kept in
    one class because they all guard the same private state."""

    def __init__(self, state: ChatState, deps: LaneDeps):
        self.state = state
        self._deps = deps
        self._running = False
        self._cancel: CancelSignal | None = None
        self._idle = asyncio.Event()
        self._idle.set()
        self._inbox: asyncio.Queue[Queued] = asyncio.Queue()
        # messages that arrived while the chat waited on an approval only an approver can give
        self._held: list[tuple[Queued, UserRef]] = []
        # background-task notices that arrived during a turn: each batch gets a turn of its own after it
        self._notices: list[Queued] = []
        # turns whose card or question could not be delivered: closed once the turn has suspended
        self._undelivered: set[str] = set()
        # suspended turns answered or decided while the lane ran: it resumes them
        self._wake: set[str] = set()
        self._last_user: UserRef | None = None

    # ---- reading -----------------------------------------------------------------------------
    @property
    def is_running(self) -> bool:
        return self._running

    @property
    def notices_waiting(self) -> int:
        return len(self._notices)

    async def wait_idle(self) -> None:
        await self._idle.wait()

    def spoke(self, user: UserRef) -> None:
        """Who spoke last: queued messages and notices run as their turn."""
        self._last_user = user

    def cancel(self) -> bool:
        """/cancel, /new, /clear: the running turn stops at its next step. False if none runs."""
        if self._cancel is None:
            return False
        self._cancel.set()
        return True

    # ---- submitting --------------------------------------------------------------------------
    def fold_in(self, msg: InboundMessage, receipt: Receipt | None) -> bool:
        """While a turn runs, a message joins its next model call. False when none runs."""
        if not self._running:
            return False
        self._inbox.put_nowait(Folded(Message.user(msg.text), receipt, msg))
        return True

    def submit_message(
        self, text: str, user: UserRef, receipt: Receipt | None = None, *, no_open_turn: bool = False
    ) -> None:
        """A user's message starts a turn (the caller found the lane idle and nothing waiting)."""
        receipts = (receipt,) if receipt is not None else ()
        self._start(self._turn(text, user, no_open_turn=no_open_turn, receipts=receipts))

    def hold(self, text: str, user: UserRef, receipt: Receipt | None) -> bool:
        """A message that waits until the approval or question the chat waits on is closed. True
        when it is the first this user has waiting (they are told once why there is no answer)."""
        first = all(held.user_id != user.user_id for _, held in self._held)
        self._held.append((Queued(Message.user(text), receipt), user))
        return first

    def held_receipts(self) -> list[Receipt]:
        return [q.receipt for q, _ in self._held if q.receipt is not None]

    def forget_held(self) -> None:
        """Another replica may run the chat next: what was held stays stored, and is taken up
        again by whoever runs the chat then."""
        self._held.clear()

    def release_held(self) -> None:
        """A decision was made: what waited for it joins the resumed turn (if that turn stops at
        another card, the lane holds it again)."""
        if not self._held:
            return
        for item, user in self._held:
            self._inbox.put_nowait(item)
            self._last_user = user
        self._held.clear()
        if not self._running:
            queued = [self._inbox.get_nowait() for _ in range(self._inbox.qsize())]
            self._start(self._queued_turn(queued, self._user()))

    def submit_notice(self, text: str, receipt: Receipt | None = None) -> None:
        """Wake a turn with a system notification (a background task finished); queued behind a
        running turn, never mixed into the user's own message. `receipt`: the notice is recorded
        until its turn has stored it."""
        queued = Queued(Message.user(text), receipt)
        if self._running:
            self._notices.append(queued)  # its own turn once the running one ends
            return
        self._start(self._queued_turn([queued], self._user(), notification=True))

    def run_skill(self, text: str, user: UserRef) -> None:
        """A skill command (/checkup …): its instructions become this turn's message."""
        if self._running:
            self._inbox.put_nowait(Queued(Message.user(text)))
            return
        self._start(self._turn(text, user))

    def resume_soon(self, turn_id: str) -> None:
        """Resume a turn that was answered or decided. While the lane runs (the turn may still be
        finishing its suspension) the lane resumes it, never a second turn at once."""
        if self._running:
            self._wake.add(turn_id)
        else:
            self._start(self._resume(turn_id))

    def undelivered(self, turn_id: str) -> None:
        """What the turn waits on reached nobody: the lane closes it once it has suspended."""
        self._undelivered.add(turn_id)

    async def run_brief(self, text: str) -> None:
        """An unattended turn (approval-requiring tools are denied) whose answer is delivered into
        the chat. Raises if it cannot be delivered, so the scheduler retries with backoff."""
        while self._running:  # behind the user's own turn, never interleaved with it
            await self._idle.wait()
        self._running = True
        self._idle.clear()
        try:
            async with self._chat_lock():
                await self._brief(text)
        finally:
            self._running = False
            self._idle.set()
        if not self._inbox.empty() or self._notices:
            self._start(None)  # what queued up behind the brief
        else:
            self._deps.router.lane_idle(self.state)

    def _chat_lock(self) -> AbstractAsyncContextManager[None]:
        lock = self._deps.chat_lock
        return nullcontext() if lock is None else lock.hold(self.state.key)

    async def _brief(self, text: str) -> None:
        state, deps = self.state, self._deps
        request = TurnRequest(
            session_id=state.session_id,
            text=text,
            who=Requester(state.owner, state.key, (), unattended=True, account=group_account(state.chat)),
            model=state.model,
            system_dynamic=deps.header.for_chat(state),
            meta={"brief": True},
            stop=deps.stop,
        )
        final = ""
        async for event in deps.runtime.run(request):
            if isinstance(event, ev.Done):
                if event.status == "interrupted":
                    raise DeliveryError("the bot is stopping; the brief was not finished")
                final = event.text
            elif isinstance(event, ev.ErrorEvent):
                raise DeliveryError(event.message)
        # a header: a brief arrives unasked, among the chat's other messages
        header = t(state.lang, "brief_header", date=datetime.now(UTC).strftime("%Y-%m-%d"))
        await deps.output.adapter(state).send_text(
            state.chat, f"{header}\n\n{final or t(state.lang, 'brief_empty')}"
        )

    # ---- running -----------------------------------------------------------------------------
    def _user(self) -> UserRef:
        return self._last_user or UserRef(self.state.chat.platform, "")

    def _start(self, job: Events | None) -> None:
        self._running = True
        self._idle.clear()
        self._cancel = self._cancel if self._cancel and not self._cancel.is_set() else CancelSignal()
        self._deps.output.spawn(self._worker(job), f"turn:{self.state.key}")

    def _turn(
        self,
        text: str,
        user: UserRef,
        no_open_turn: bool = False,
        receipts: tuple[Receipt, ...] = (),
        **meta: Any,
    ) -> Events:
        state, deps = self.state, self._deps
        # The lane's signal is the one /cancel and shutdown set: this turn must watch that very one.
        if self._cancel is None or self._cancel.is_set():
            self._cancel = CancelSignal()
        request = TurnRequest(
            session_id=state.session_id,
            text=text,
            who=Requester(
                user.user_id,
                state.key,
                deps.approvers.approvers_for(state.chat, user),
                account=group_account(state.chat),
            ),
            model=state.model,
            system_dynamic=deps.header.for_chat(state),
            inbox=self._inbox,
            cancel=self._cancel,
            stop=deps.stop,
            meta=meta,
            no_open_turn=no_open_turn,
            receipts=receipts,
            deliver=True,  # the view confirms the answer was sent (bot/delivery.py)
        )
        run = lambda: deps.runtime.run(request)  # noqa: E731
        return deps.patience.begun(state, run, deps.output.say, deps.stop, text)

    def _queued_turn(self, queued: list[Queued], user: UserRef, **meta: Any) -> Events:
        """One turn for messages that queued up: their texts joined, their receipts with them."""
        text = "\n\n".join(q.message.text for q in queued)
        receipts = tuple(q.receipt for q in queued if q.receipt is not None)
        return self._turn(text, user, receipts=receipts, **meta)

    def _resume(self, turn_id: str) -> Events:
        state, deps = self.state, self._deps
        self._cancel = CancelSignal()
        req = TurnRequest(
            session_id=state.session_id,
            inbox=self._inbox,
            cancel=self._cancel,
            stop=deps.stop,
            model=state.model,
            system_dynamic=deps.header.for_chat(state),
            deliver=True,
        )
        return _after(deps.recovered, deps.runtime.resume(turn_id, req))

    async def _worker(self, job: Events | None) -> None:
        """Runs `job`, then whatever queued up meanwhile (`None`: only the queue), one at a time;
        then reads again what arrived while the last turn was delivering its card or question."""
        try:
            async with self._chat_lock():  # across replicas: one lane runs the chat's turns
                early = await self._run_jobs(job)
        except Exception:  # the chat's lease could not be taken or given back: the lane stays usable
            log.exception("the chat lease of %s failed", self.state.key)
            self._running, self._cancel = False, None
            self._idle.set()
            self._deps.router.lane_idle(self.state)
            return
        for item in early:
            if item.inbound is None or self._deps.stop.is_set():
                continue  # still recorded: the restart takes it up
            try:
                await self._deps.router.on_message(self.state, item.inbound, item.receipt)
            except Exception:  # one message's failure must not lose the ones after it
                log.exception("an early reply in %s could not be read", self.state.key)
        if not self._running:
            self._deps.router.lane_idle(self.state)

    async def _run_jobs(self, job: Events | None) -> list[Folded]:
        """The lane's loop; returns the messages folded into a turn that then suspended."""
        state, deps = self.state, self._deps
        try:
            while True:
                done: ev.Done | None = None
                if job is not None:
                    try:
                        done = await render_all(deps.output.view(state), job)
                    except Exception:
                        log.exception("turn in %s failed", state.key)
                        await deps.output.say(state, t(state.lang, "internal_error"))
                if deps.stop.is_set():
                    return []  # queued messages stay recorded: the restart takes them up
                if done is not None and done.turn_id in self._undelivered:
                    await self._close_undelivered(done)
                if self._wake:  # answered or decided while this lane ran: it goes on now
                    job = self._resume(self._wake.pop())
                    continue
                # Messages that arrived after the last model call start the next turn: never dropped.
                leftovers: list[Queued] = []
                while not self._inbox.empty():
                    leftovers.append(self._inbox.get_nowait())
                user = self._user()
                # a turn that ended (not suspended) leaves nothing waiting: no need to ask the store
                ended = done is not None and done.status != "suspended"
                if not ended and is_waiting(await deps.turns.open_turn(state.session_id)):
                    while not self._inbox.empty():  # arrived during that await
                        leftovers.append(self._inbox.get_nowait())
                    early = [q for q in leftovers if isinstance(q, Folded)]
                    # anything else queued (a skill, a held message) waits for the decision
                    # instead of silently cancelling it as "moved on"
                    self._held.extend((q, user) for q in leftovers if not isinstance(q, Folded))
                    if self._wake:  # decided during the await above: they join the resumed turn
                        for q in early:
                            self._inbox.put_nowait(q)
                        job = None
                        continue
                    # sent while the card or question was on its way: the router reads them
                    # against it now that the turn waits (an answer, a decision, a new request)
                    return early
                if self._held:  # they waited for a decision; nothing is waiting any more
                    held, self._held = self._held, []
                    if not leftovers:
                        user = held[-1][1]
                    leftovers = [q for q, _ in held] + leftovers
                self._cancel = CancelSignal()
                if leftovers:
                    job = self._queued_turn(leftovers, user)
                elif self._notices:
                    # task notices wait for the user's turn to end, then get a turn of their own
                    notices, self._notices = self._notices, []
                    job = self._queued_turn(notices, user, notification=True)
                elif self._wake:
                    job = None  # the loop's top resumes it
                else:
                    return []  # `_wake` was checked with no await since: nothing is left behind
        finally:
            self._running = False
            self._cancel = None
            self._idle.set()

    async def _close_undelivered(self, done: ev.Done) -> None:
        """What the turn waits on reached nobody: close it now (an approval is denied, a question
        unanswered) rather than let the chat wait for its expiry."""
        self._undelivered.discard(done.turn_id)
        if done.status == "suspended":
            await self._deps.runtime.answer(done.turn_id, "", status="undeliverable")
            self._wake.add(done.turn_id)


class Lanes:
    """The lanes of the chats seen since the start, by chat key."""

    def __init__(self, deps: LaneDeps):
        self._deps = deps
        self._lanes: dict[str, Lane] = {}

    async def take_here(self, chat_key: str) -> bool:
        """Hold the chat here; False when another live replica runs it (recovery leaves its work
        to it). Always True for a single process."""
        lock = self._deps.chat_lock
        if lock is None:
            return True
        if not await lock.take(chat_key):
            return False
        lock.taken_over(chat_key)  # the caller (recovery) resumes what the dead replica left
        return True

    def idle(self, state: ChatState) -> None:
        """Nothing was started in the chat held for it: it may be let go."""
        if not self.of(state).is_running:
            self._deps.router.lane_idle(state)

    def of(self, state: ChatState) -> Lane:
        lane = self._lanes.get(state.key)
        if lane is None:  # the chat directory keeps one state per key: its lane follows it
            lane = self._lanes[state.key] = Lane(state, self._deps)
        return lane


async def _after(ready: asyncio.Event | None, events: Events) -> Events:
    if ready is not None:
        await ready.wait()
    async for event in events:
        yield event
