"""Fixtures for the adapter tests: the fake Bot API / fake Discord and adapters wired to them."""

from __future__ import annotations

import contextlib

import pytest

from adapters.discord import DiscordAdapter
from adapters.telegram import TelegramAdapter
from tests.fakes.clock import FakeClock
from tests.fakes.discord_fake import FakeDiscord
from tests.fakes.recorder import Recorder
from tests.fakes.telegram_api import FakeBotAPI, FakeRequest


@pytest.fixture
def recorder() -> Recorder:
    return Recorder()


@pytest.fixture
def fake_sleep() -> FakeClock:
    """Injected time for the adapters' backoff: `fake_sleep.sleep` records (`.sleeps`), returns at once."""
    return FakeClock()


@pytest.fixture
def tg_api() -> FakeBotAPI:
    return FakeBotAPI(max_poll_wait=0.05)


@pytest.fixture
async def make_tg(tg_api, fake_sleep):
    """Factory: build + start a TelegramAdapter on the in-process fake; stopped at teardown."""
    started: list[TelegramAdapter] = []

    async def make(handler, **kw) -> TelegramAdapter:
        kw.setdefault("poll_timeout", 0.05)
        kw.setdefault("sleep", fake_sleep.sleep)
        kw.setdefault("stop_grace_s", 1.0)
        ad = TelegramAdapter(
            tg_api.token, request=FakeRequest(tg_api), get_updates_request=FakeRequest(tg_api), **kw
        )
        await ad.start(handler)
        started.append(ad)
        return ad

    yield make
    for ad in started:
        with contextlib.suppress(Exception):
            await ad.stop()


@pytest.fixture
async def dc_fake():
    fake = FakeDiscord(tls=True)  # reached through each adapter's own connector
    await fake.start()
    yield fake
    await fake.close()


class MemoryKV(dict):
    async def aget(self, key: str):
        return self.get(key)

    async def aset(self, key: str, value: str) -> None:
        self[key] = value


@pytest.fixture
def kv() -> MemoryKV:
    return MemoryKV()


@pytest.fixture
async def make_dc(dc_fake, kv):
    started: list[DiscordAdapter] = []

    async def make(handler, **kw) -> DiscordAdapter:
        kw.setdefault("ready_timeout", 5)
        kw.setdefault("guild_ready_timeout", 0.05)
        kw.setdefault("stop_grace_s", 1.0)
        kw.setdefault("connector", dc_fake.connector())
        ad = DiscordAdapter("fake-discord-token-xyz", kv_get=kv.aget, kv_set=kv.aset, **kw)
        await ad.start(handler)
        started.append(ad)
        return ad

    yield make
    for ad in started:
        with contextlib.suppress(Exception):
            await ad.stop()
