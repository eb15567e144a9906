"""Several replicas of the bot on one database and one bot token: the webhook secret is the same on
each, at most one replica polls (a lease in the database; a standby takes over when it expires),
and a replica in polling mode never switches a webhook deployment off.

Real databases (a SQLite file; PostgreSQL too when TAPEBOT_TEST_POSTGRES_URL is set), the fake Bot
API at its wire protocol, and a clock the test moves to expire leases."""

from __future__ import annotations

import contextlib
import logging
import os
from datetime import UTC, datetime

import aiohttp
import pytest

from adapters.telegram import TelegramAdapter, WebhookConfig
from bot.replicas import POLLER, TelegramReplicas, died_here, new_replica_id
from memory.coordination import Leases
from memory.db import Database
from tests.fakes.clock import FakeClock
from tests.fakes.net import free_port
from tests.fakes.recorder import Recorder
from tests.fakes.telegram_api import FakeRequest, text_update

PG_URL = os.environ.get("TAPEBOT_TEST_POSTGRES_URL", "")
HEADER = "X-Telegram-Bot-Api-Secret-Token"
TTL = 0.6  # seconds of lease: the replicas recheck every 0.2 s; expiry is driven by `FakeClock`


class Counting(FakeRequest):
    """One replica's transport: which Bot API methods this replica called."""

    def __init__(self, api):
        super().__init__(api)
        self.methods: list[str] = []

    async def do_request(self, url, method, request_data=None, **kw):
        self.methods.append(url.rsplit("/", 1)[-1])
        return await super().do_request(url, method, request_data, **kw)


@pytest.fixture
async def db(database_url):
    async with Database(database_url) as database:
        yield database


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock(datetime(2026, 1, 5, 9, 0, tzinfo=UTC))


@pytest.fixture
async def replica(tg_api, tmp_path, clock):
    """Factory: a started adapter for replica `name`, each with its own database connection pool
    (as separate processes have) on the same database; stopped at teardown."""
    started: list[TelegramAdapter] = []
    dbs: list[Database] = []

    async def make(name: str, db: Database, handler, **kw) -> tuple[TelegramAdapter, Counting]:
        own = Database(db.url, migrate=False)
        await own.start()
        dbs.append(own)
        transport = Counting(tg_api)
        gate = TelegramReplicas(Leases(own), name, ttl=TTL, clock=clock.now)
        ad = TelegramAdapter(
            tg_api.token,
            request=transport,
            get_updates_request=transport,
            poll_timeout=0.05,
            stop_grace_s=1.0,
            replicas=gate,
            **kw,
        )
        await ad.start(handler)
        started.append(ad)
        return ad, transport

    yield make
    for ad in started:
        with contextlib.suppress(Exception):
            await ad.stop()
    for own in dbs:
        await own.close()


async def _post(url: str, body: dict, secret: str) -> int:
    async with aiohttp.ClientSession() as s, s.post(url, json=body, headers={HEADER: secret}) as r:
        return r.status


async def test_webhook_replicas_without_a_configured_secret_accept_the_same_one(tg_api, db, replica):
    """Two webhook replicas, no secret configured: whichever registered last, a post with the
    registered secret is accepted by both (a random secret per process left all but the last
    replica answering 403)."""
    a_rec, b_rec = Recorder(), Recorder()
    urls = []
    for name, rec in (("a", a_rec), ("b", b_rec)):
        port = free_port()
        cfg = WebhookConfig(url=f"http://127.0.0.1:{port}/tg", port=port, path="/tg")
        await replica(name, db, rec, webhook=cfg)
        urls.append(cfg.url)
    registered = tg_api.webhook["secret_token"]
    assert await _post(urls[0], text_update(1, "to a"), registered) == 200
    assert await _post(urls[1], text_update(2, "to b"), registered) == 200
    assert [e.text for e in a_rec.events] == ["to a"]
    assert [e.text for e in b_rec.events] == ["to b"]


async def test_one_replica_polls_and_a_standby_takes_over_a_dead_pollers_lease(
    tg_api, db, replica, clock, caplog
):
    """A dead replica's unexpired lease keeps both live replicas from polling; once it expires
    exactly one of them takes it, polls and handles the updates, the other never calls
    getUpdates; when the poller stops, the standby takes over."""
    caplog.set_level(logging.INFO)
    await Leases(db).take(POLLER, "dead", now=clock.now(), ttl=TTL)  # killed -9: never renewed again
    a_rec, b_rec = Recorder(), Recorder()
    a, a_calls = await replica("a", db, a_rec)
    b, b_calls = await replica("b", db, b_rec)
    tg_api.push_text(5, "while the dead one holds it")
    await tg_api.wait_for(lambda: "standing by; replica dead polls" in caplog.text)
    assert "getUpdates" not in a_calls.methods and "getUpdates" not in b_calls.methods
    assert a_rec.events == [] and b_rec.events == []

    clock.advance(TTL + 0.1)  # the dead replica's lease expires
    await tg_api.wait_for(lambda: len(a_rec.events) + len(b_rec.events) == 1)
    poller, standby = (a_calls, b_calls) if a_rec.events else (b_calls, a_calls)
    tg_api.push_text(5, "second")
    await tg_api.wait_for(lambda: len(a_rec.events) + len(b_rec.events) == 2)
    assert "getUpdates" in poller.methods and "getUpdates" not in standby.methods
    assert "deleteWebhook" not in standby.methods

    holder, waiting, waiting_rec = (a, b, b_rec) if poller is a_calls else (b, a, a_rec)
    await holder.stop()  # releases the lease: the standby takes over at its next check
    tg_api.push_text(5, "after the handover")
    await tg_api.wait_for(lambda: [e.text for e in waiting_rec.events][-1:] == ["after the handover"])
    assert "getUpdates" in standby.methods
    assert waiting is not holder


async def test_polling_replica_leaves_a_webhook_deployment_alone(tg_api, db, replica, clock, caplog):
    """While a webhook replica announces itself, a replica started in polling mode calls neither
    deleteWebhook nor getUpdates and says why; the webhook stays registered. When no webhook
    replica has announced itself for a lease's time, the polling replica takes over."""
    caplog.set_level(logging.INFO)
    port = free_port()
    cfg = WebhookConfig(url=f"http://127.0.0.1:{port}/tg", port=port, path="/tg")
    hook, _ = await replica("hook", db, Recorder(), webhook=cfg)
    polled_rec = Recorder()
    _, calls = await replica("poll", db, polled_rec)
    await tg_api.wait_for(lambda: "does not call deleteWebhook" in caplog.text)
    assert tg_api.webhook.get("url") == cfg.url
    assert "deleteWebhook" not in calls.methods and "getUpdates" not in calls.methods
    assert await _post(cfg.url, text_update(7, "via the webhook"), tg_api.webhook["secret_token"]) == 200

    await hook.stop()  # the webhook deployment is gone; its announcement runs out
    clock.advance(TTL + 0.1)
    await tg_api.wait_for(lambda: "deleteWebhook" in calls.methods)
    tg_api.push_text(5, "polled now")
    await tg_api.wait_for(lambda: [e.text for e in polled_rec.events] == ["polled now"])


async def test_lease_is_exclusive_until_it_expires(db, clock):
    """The lease itself: the holder renews, others are refused with the holder's name, an expired
    lease goes to the next taker, a release lets the next taker in at once."""
    leases = Leases(db)
    assert (await leases.take("x", "a", now=clock.now(), ttl=10)).held
    refused = await leases.take("x", "b", now=clock.now(), ttl=10)
    assert not refused.held and refused.owner == "a"
    clock.advance(5)
    assert (await leases.take("x", "a", now=clock.now(), ttl=10)).held  # renewed to +15
    clock.advance(9)
    assert not (await leases.take("x", "b", now=clock.now(), ttl=10)).held
    clock.advance(2)
    assert (await leases.take("x", "b", now=clock.now(), ttl=10)).held
    await leases.release("x", "b", now=clock.now())
    assert (await leases.take("x", "a", now=clock.now(), ttl=10)).held
    assert await leases.live("y", now=clock.now()) is None
    await leases.mark("y", "a", now=clock.now(), ttl=10)
    await leases.mark("y", "b", now=clock.now(), ttl=10)
    live = await leases.live("y", now=clock.now())
    assert live is not None and live.owner == "b"
    clock.advance(11)
    assert await leases.live("y", now=clock.now()) is None


async def test_a_poller_killed_on_this_machine_is_taken_over_at_once(tg_api, db, replica, clock):
    """A restart after a kill -9 on the same machine does not wait out the dead process's lease:
    its process is known to be gone. A live holder's lease (this process) is never taken."""
    import subprocess
    import sys

    code = "from bot.replicas import new_replica_id; print(new_replica_id())"
    dead = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    dead_id = dead.stdout.strip()
    assert died_here(dead_id) and not died_here(new_replica_id())
    await Leases(db).take(POLLER, dead_id, now=clock.now(), ttl=3600)
    rec = Recorder()
    await replica("restarted", db, rec)
    tg_api.push_text(5, "after the restart")
    await tg_api.wait_for(lambda: [e.text for e in rec.events] == ["after the restart"])


async def test_a_failed_delete_webhook_is_retried_not_the_end_of_polling(tg_api, db, replica):
    """Taking the poller's turn calls deleteWebhook; when that fails (a Telegram 500) the replica
    tries again at its next check instead of its polling loop dying."""
    tg_api.fail(
        "deleteWebhook", (500, {"ok": False, "error_code": 500, "description": "Internal Server Error"})
    )
    rec = Recorder()
    _, calls = await replica("a", db, rec)
    tg_api.push_text(5, "still polled")
    await tg_api.wait_for(lambda: [e.text for e in rec.events] == ["still polled"])
    assert calls.methods.count("deleteWebhook") >= 2
