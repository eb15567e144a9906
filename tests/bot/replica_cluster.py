"""N `tapebot run` replicas (real processes) on one PostgreSQL database behind a round-robin
webhook forwarder, the fake Telegram Bot API and the scripted LLM server — for
tests/bot/test_bot_replicas.py and bench/replicas.py.

The forwarder plays Telegram's side of a webhook: each update is POSTed to the next replica in
turn; a refused or failed POST (a replica that died) is posted to the next one, as Telegram
redelivers. The model echoes which messages it was given ("ACK[c3m1 c3m2]"), after `model_delay`
seconds, so every answer says which messages it answers; "write" asks for a file (an approval),
answered "WROTE[c3]" once the tool has run.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import os
import re
import signal
import sys
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp

from tests.fakes.llm_server import Reply, ScriptedLLMServer, ToolCall
from tests.fakes.net import free_port
from tests.fakes.telegram_api import FakeBotAPI, button_of, buttons_of
from tests.pg import empty_schema

ROOT = Path(__file__).resolve().parents[2]
TOKEN = "123456:TEST-token-abcdef"
SECRET_HEADER = "X-Telegram-Bot-Api-Secret-Token"
MARK = re.compile(r"c(\d+)m(\d+)")
ACK = re.compile(r"ACK\[([^\]]*)\]")
WROTE = re.compile(r"WROTE\[c(\d+)\]")
FIRST_CHAT = 5000


def _text(content: Any) -> str:
    if isinstance(content, list):
        return " ".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
    return str(content or "")


def tool_result(messages: list[dict[str, Any]]) -> str | None:
    """The tool call id answered since the model's last message, if any."""
    for m in reversed(messages):
        if m.get("role") == "assistant":
            return None
        if m.get("role") == "tool":
            return str(m.get("tool_call_id"))
    return None


def echo_model(delay: float):
    """The scripted model: acknowledges the user messages since its last answer, in order."""

    def answer(body: dict[str, Any]) -> Reply:
        messages = body.get("messages", [])
        if tool_result(messages) is not None:
            chat = next(
                (m for m in reversed(messages) if m.get("role") == "user" and "write" in _text(m["content"])),
                None,
            )
            found = re.search(r"c(\d+)w", _text(chat["content"])) if chat else None
            return Reply(text=f"WROTE[c{found.group(1) if found else '?'}]", stall_before=delay)
        fresh: list[str] = []
        for m in reversed(messages):
            if m.get("role") == "assistant":
                break
            if m.get("role") == "user":
                fresh.insert(0, _text(m["content"]))
        if any("daily brief" in t for t in fresh):
            return Reply(text="BRIEF[]", stall_before=delay)
        if any("write" in t for t in fresh):
            chat = re.search(r"c(\d+)w", " ".join(fresh))
            n = chat.group(1) if chat else "0"
            return Reply(
                tool_calls=[ToolCall("write_file", {"path": f"c{n}.txt", "content": "x"})], stall_before=delay
            )
        marks = [f"c{c}m{i}" for t in fresh for c, i in MARK.findall(t)]
        return Reply(text=f"ACK[{' '.join(marks)}]", stall_before=delay)

    return answer


@dataclass
class Replica:
    index: int
    home: Path
    port: int
    proc: asyncio.subprocess.Process | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/telegram"


@dataclass
class Outcome:
    sent: int
    lost: list[str]
    twice: list[str]
    out_of_order: list[str]
    latencies: list[float]
    elapsed: float
    # answered in the stored history but never sent: the kill -9 fell between the turn's final
    # write and its delivery (the runtime stores, then sends; a restart does not send it again)
    unsent: list[str] = field(default_factory=list)
    wrote: Counter[str] = field(default_factory=Counter)
    tool_runs: Counter[str] = field(default_factory=Counter)

    @property
    def rate(self) -> float:
        return self.sent / self.elapsed if self.elapsed else 0.0

    def p95(self) -> float:
        if not self.latencies:
            return float("nan")
        ordered = sorted(self.latencies)
        return ordered[min(len(ordered) - 1, int(0.95 * len(ordered)))]


class Cluster:
    def __init__(
        self,
        base: Path,
        db_url: str,
        replicas: int,
        *,
        chats: int,
        model_delay: float = 0.1,
        lease_s: float = 3.0,
    ):
        self.base, self.db_url, self.lease_s = base, db_url, lease_s
        self.chat_ids = [FIRST_CHAT + i for i in range(chats)]
        self.api = FakeBotAPI(token=TOKEN)
        self.llm = ScriptedLLMServer()
        self.llm.default = echo_model(model_delay)
        self.replicas = [Replica(i, base / f"replica{i}", free_port()) for i in range(replicas)]
        self._turn = itertools.count()
        self.posted: dict[str, float] = {}  # marker -> when the forwarder handed it over
        self._session: aiohttp.ClientSession | None = None
        self.scheduler = False  # run the scheduler (briefs); one replica holds its lease

    # ---- lifecycle ---------------------------------------------------------------------------------
    async def __aenter__(self) -> Cluster:
        await empty_schema(self.db_url)
        await self.api.serve()
        await self.llm.start()
        for chat in self.chat_ids:
            self.api.user(chat, f"U{chat}")
            self.api.chat(chat)
        self._session = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=30))
        for r in self.replicas:  # one at a time: the first applies the migrations
            await self.start(r)
        return self

    async def __aexit__(self, *exc: object) -> None:
        for r in self.replicas:
            await self.stop(r)
        if self._session is not None:
            await self._session.close()
        await self.llm.close()
        await self.api.close()

    async def start(self, r: Replica) -> None:
        r.home.mkdir(parents=True, exist_ok=True)
        users = ", ".join(str(c) for c in self.chat_ids)
        (r.home / "config.toml").write_text(
            f'[telegram]\napi_base_url = "{self.api.base_url}"\nallowed_users = [{users}]\n'
        )
        env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
        env.update(
            TAPEBOT_HOME=str(r.home),
            TAPEBOT_DATABASE_URL=self.db_url,
            TELEGRAM_BOT_TOKEN=TOKEN,
            TAPEBOT_TELEGRAM__MODE="webhook",
            TAPEBOT_TELEGRAM__WEBHOOK_URL="https://bot.example/telegram",
            TAPEBOT_TELEGRAM__WEBHOOK_PORT=str(r.port),
            TAPEBOT_TELEGRAM__MAX_BACKLOG_AGE_S="3600",
            TAPEBOT_CHAT_LEASE_S=str(self.lease_s),
            OPENAI_API_KEY="sk-test-000000000000",
            OPENAI_BASE_URL=self.llm.openai_base_url,
            TAPEBOT_SCHEDULER__ENABLED="true" if self.scheduler else "false",
            TAPEBOT_MEMORY__ENABLED="false",
            TAPEBOT_AGENT__SHUTDOWN_GRACE_S="2",
        )
        r.proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "bot.cli", "run", cwd=ROOT, env=env,
            stdout=asyncio.subprocess.DEVNULL, stderr=open(r.home / "stderr.log", "ab"),
        )  # fmt: skip
        deadline = time.monotonic() + 90
        while not await self._accepts(r):
            if r.proc.returncode is not None or time.monotonic() > deadline:
                raise RuntimeError(
                    f"replica {r.index} did not start: {(r.home / 'stderr.log').read_text()[-3000:]}"
                )
            await asyncio.sleep(0.1)

    async def _accepts(self, r: Replica) -> bool:
        try:
            _, writer = await asyncio.open_connection("127.0.0.1", r.port)
        except OSError:
            return False
        writer.close()
        with contextlib.suppress(Exception):
            await writer.wait_closed()
        return bool(self.api.webhook.get("secret_token"))

    async def kill(self, r: Replica) -> None:
        """kill -9: no drain, no lease given back."""
        if r.proc is not None and r.proc.returncode is None:
            r.proc.send_signal(signal.SIGKILL)
            await r.proc.wait()
        r.proc = None

    async def stop(self, r: Replica) -> None:
        if r.proc is not None and r.proc.returncode is None:
            r.proc.send_signal(signal.SIGTERM)
            try:
                await asyncio.wait_for(r.proc.wait(), 30)
            except TimeoutError:
                await self.kill(r)
        r.proc = None

    # ---- the forwarder -----------------------------------------------------------------------------
    async def forward(self, update: dict[str, Any]) -> None:
        """POST to the next replica; one that refuses or fails: the next (Telegram redelivers)."""
        assert self._session is not None
        headers = {SECRET_HEADER: self.api.webhook["secret_token"]}
        while True:
            r = self.replicas[next(self._turn) % len(self.replicas)]
            try:
                async with self._session.post(r.url, json=update, headers=headers) as resp:
                    if resp.status == 200:
                        return
            except (aiohttp.ClientError, OSError, TimeoutError):
                pass
            await asyncio.sleep(0.02)

    def _take(self, uid: int) -> dict[str, Any]:
        update = next(u for u in self.api.updates if u["update_id"] == uid)
        self.api.updates.remove(update)
        return update

    async def say(self, chat: int, text: str) -> None:
        update = self._take(self.api.push_text(chat, text, user_id=chat))
        for c, i in MARK.findall(text):
            self.posted[f"c{c}m{i}"] = time.monotonic()
        await self.forward(update)

    async def tap(self, chat: int, message_id: int, data: str) -> None:
        await self.forward(self._take(self.api.push_callback(chat, message_id, data, user_id=chat)))

    # ---- what came out -----------------------------------------------------------------------------
    def first_seen(self) -> dict[str, float]:
        """When each marker first appeared in a message the bot sent or edited."""
        seen: dict[str, float] = {}
        for call in self.api.calls:
            if call.method in ("sendMessage", "editMessageText"):
                for group in ACK.findall(str(call.params.get("text", ""))):
                    for mark in group.split():
                        seen.setdefault(mark, call.at)
        return seen

    async def stored_answers(self) -> set[str]:
        """The markers the stored histories' answers name."""
        from sqlalchemy import text
        from sqlalchemy.ext.asyncio import create_async_engine

        engine = create_async_engine(self.db_url)
        try:
            async with engine.connect() as conn:
                rows = (
                    await conn.execute(text("SELECT payload FROM messages WHERE role = 'assistant'"))
                ).all()
        finally:
            await engine.dispose()
        return {m for (payload,) in rows for g in ACK.findall(json.dumps(payload)) for m in g.split()}

    async def outcome(self, started: float, expected: list[str]) -> Outcome:
        counts: Counter[str] = Counter()
        out_of_order: list[str] = []
        wrote: Counter[str] = Counter()
        for chat in self.chat_ids:
            last = 0
            for text in self.api.texts(chat):
                wrote.update(f"c{c}" for c in WROTE.findall(text))
                for group in ACK.findall(text):
                    for mark in group.split():
                        counts[mark] += 1
                        n = int(MARK.fullmatch(mark).group(2)) if MARK.fullmatch(mark) else 0  # type: ignore[union-attr]
                        if n < last:
                            out_of_order.append(mark)
                        last = max(last, n)
        seen = self.first_seen()
        tool_runs: Counter[str] = Counter()
        for req in self.llm.requests:
            call_id = tool_result(req.body.get("messages", []))
            if call_id is not None:
                tool_runs[call_id] += 1
        missing = [m for m in expected if counts[m] == 0]
        stored = await self.stored_answers() if missing else set()
        return Outcome(
            sent=len(expected),
            lost=[m for m in missing if m not in stored],
            unsent=[m for m in missing if m in stored],
            twice=[m for m in expected if counts[m] > 1],
            out_of_order=out_of_order,
            latencies=[seen[m] - self.posted[m] for m in expected if m in seen and m in self.posted],
            elapsed=(max(seen.values()) - started) if seen else 0.0,
            wrote=wrote,
            tool_runs=tool_runs,
        )

    def card(self, chat: int) -> dict[str, Any] | None:
        return next((m for m in self.api.sent(chat) if buttons_of(m)), None)


async def converse(
    cluster: Cluster,
    *,
    per_chat: int,
    gap: float = 0.15,
    kill_after: int | None = None,
    down_for: float | None = 2.0,
    approvals: int = 0,
    timeout: float = 180.0,
    on_messages: Callable[[Outcome], None] | None = None,
) -> Outcome:
    """Every chat sends `per_chat` messages, `gap` seconds apart (the forwarder spreads them over
    the replicas); after `kill_after` messages in all, replica 0 is killed -9 and restarted
    `down_for` seconds later (None: never — the survivors take its chats over). The first `approvals` chats then ask for a file and tap the card's
    button twice, on two replicas. Waits until every message is answered (or `timeout`)."""
    expected = [f"c{c}m{i}" for c in cluster.chat_ids for i in range(1, per_chat + 1)]
    sent = 0
    killed = asyncio.Event()
    restart: asyncio.Task[None] | None = None

    async def bounce() -> None:
        victim = cluster.replicas[0]
        await cluster.kill(victim)
        killed.set()
        if down_for is None:  # not restarted: the survivors take its chats over
            return
        await asyncio.sleep(down_for)
        await cluster.start(victim)

    async def chat_run(chat: int, offset: float) -> None:
        nonlocal sent, restart
        await asyncio.sleep(offset)
        for i in range(1, per_chat + 1):
            await cluster.say(chat, f"c{chat}m{i}")
            sent += 1
            if kill_after is not None and sent == kill_after and restart is None:
                restart = asyncio.create_task(bounce())
            await asyncio.sleep(gap)

    started = time.monotonic()
    n = len(cluster.chat_ids)
    await asyncio.gather(*(chat_run(c, gap * k / n) for k, c in enumerate(cluster.chat_ids)))
    if restart is not None:
        await restart
    deadline = time.monotonic() + timeout
    settled_at, last_seen = time.monotonic(), 0
    while time.monotonic() < deadline:
        seen = cluster.first_seen()
        if all(m in seen for m in expected):
            break
        if len(seen) != last_seen:
            settled_at, last_seen = time.monotonic(), len(seen)
        elif time.monotonic() - settled_at > 60:
            # nothing new for a while: done if the rest is in a stored answer (cut off by the
            # kill between storing and sending it), counted apart by `outcome`
            stored = await cluster.stored_answers()
            if all(m in seen or m in stored for m in expected):
                break
            settled_at = time.monotonic()
        await asyncio.sleep(0.1)
    await asyncio.sleep(1.0)  # a duplicate would come now
    outcome = await cluster.outcome(started, expected)
    if on_messages is not None:
        on_messages(outcome)
    for chat in cluster.chat_ids[:approvals]:
        await cluster.say(chat, f"please write c{chat}w")
        card = await cluster.api.wait_for(lambda chat=chat: cluster.card(chat), timeout=timeout)
        once = button_of(card, "o")
        await cluster.tap(chat, card["message_id"], once["callback_data"])
        await cluster.tap(chat, card["message_id"], once["callback_data"])
    if approvals:
        want = {f"c{c}" for c in cluster.chat_ids[:approvals]}
        try:
            await cluster.api.wait_for(
                lambda: (
                    want
                    <= {
                        f"c{c}"
                        for chat in cluster.chat_ids
                        for t in cluster.api.texts(chat)
                        for c in WROTE.findall(t)
                    }
                ),
                timeout=timeout,
            )
        except AssertionError:
            texts = {c: cluster.api.texts(c)[-4:] for c in cluster.chat_ids[:approvals]}
            raise AssertionError(f"the approved files were not all written: {texts}") from None
        await asyncio.sleep(1.0)
        final = await cluster.outcome(started, expected)
        outcome.wrote, outcome.tool_runs = final.wrote, final.tool_runs
    return outcome


def report(label: str, o: Outcome) -> str:
    return (
        f"{label}: {o.sent} messages, {o.rate:.1f} msg/s, p95 {o.p95() * 1000:.0f} ms, "
        f"lost {len(o.lost)}, answered twice {len(o.twice)}, out of order {len(o.out_of_order)}, "
        f"answered but cut off by the kill before sending {len(o.unsent)}"
        + (f", approvals executed {sum(o.tool_runs.values())} for {len(o.wrote)} chats" if o.wrote else "")
    )


if __name__ == "__main__":  # pragma: no cover
    print(json.dumps({"see": "bench/replicas.py"}))
