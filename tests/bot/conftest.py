from __future__ import annotations

import pytest

from agent.providers.scripted import ScriptedClient
from bot.app import App
from config.loader import load_settings
from tests.fakes.discord_fake import FakeDiscord
from tests.fakes.telegram_api import FakeBotAPI, FakeRequest
from tests.pg import fresh_postgres

ALICE, BOB, ADMIN = 1001, 1002, 1003


def make_settings(home, extra_env=None):
    env = {
        "TAPEBOT_HOME": str(home),
        "OPENAI_API_KEY": "sk-test-not-used-000000",
        "TELEGRAM_BOT_TOKEN": "123456:TEST-token-abcdef",
        "TAPEBOT_TELEGRAM__ALLOWED_USERS": f"[{ALICE},{BOB},{ADMIN}]",
        "TAPEBOT_TELEGRAM__ADMINS": f"[{ADMIN}]",
        "TAPEBOT_TELEGRAM__MAX_BACKLOG_AGE_S": "600",
        "TAPEBOT_SCHEDULER__ENABLED": "false",
        # memory upkeep calls the model in the background; tests that script the model turn by
        # turn switch it off (tests/bot/test_bot_memory_flow.py covers it with its own model)
        "TAPEBOT_MEMORY__ENABLED": "false",
        # a test's stop with a turn still held (a gated model) need not wait the default 20 s grace;
        # tests of the grace period itself set their own
        "TAPEBOT_AGENT__SHUTDOWN_GRACE_S": "0.5",
        # a crash copied in-process (`crash_copy`) leaves this process's live poller lease in the
        # copy: the restarted bot takes it over when it expires, not a minute later
        "TAPEBOT_TELEGRAM__REPLICA_LEASE_S": "0.5",
        **(extra_env or {}),
    }
    return load_settings(home, env)


def make_discord_app(home, fake: FakeDiscord, script: ScriptedClient, allowed: str, **env: str) -> App:
    """An App whose only chat is Discord, on `fake`, answering with `script`; `allowed` is the
    allowed users' list ("[42]"), `env` more settings."""
    settings = load_settings(
        home,
        {
            "TAPEBOT_HOME": str(home),
            "OPENAI_API_KEY": "sk-test-unused-000000",
            "DISCORD_BOT_TOKEN": "discord-test-token-abcdef",
            "TAPEBOT_DISCORD__ALLOWED_USERS": allowed,
            "TAPEBOT_SCHEDULER__ENABLED": "false",
            **env,
        },
    )
    return App(
        settings,
        model_factory=lambda _m: script,
        adapter_options={"discord": {"connector": fake.connector()}},
    )


class Harness:
    def __init__(self, home, api: FakeBotAPI, script: ScriptedClient, extra_env=None):
        self.home, self.api, self.script, self.extra_env = home, api, script, extra_env
        self.app: App | None = None

    def model_for(self, model_id: str | None) -> ScriptedClient:
        """The App's model factory (subclasses answer per model id)."""
        return self.script

    def telegram_options(self) -> dict:
        """The Telegram adapter's extra constructor arguments (subclasses add more)."""
        return {
            "request": FakeRequest(self.api),
            "get_updates_request": FakeRequest(self.api),
            "poll_timeout": 0.05,
        }

    async def start(self) -> App:
        settings = make_settings(self.home, self.extra_env)
        self.app = App(
            settings,
            model_factory=self.model_for,
            adapter_options={"telegram": self.telegram_options()},
        )
        await self.app.start(adapters=True)
        return self.app

    async def stop(self) -> None:
        if self.app is not None:
            await self.app.stop()
            self.app = None


# The end-to-end tests that also run on PostgreSQL take this as their first decorator.
ON_BOTH_DATABASES = pytest.mark.parametrize("database_env", ["sqlite", "postgresql"], indirect=True)


@pytest.fixture
async def database_env(request) -> dict[str, str]:
    """The bot's database as settings: its default SQLite file in its home; with ON_BOTH_DATABASES
    also PostgreSQL when a server is configured (TAPEBOT_TEST_POSTGRES_URL; CI starts one),
    emptied for each test."""
    if getattr(request, "param", "sqlite") == "sqlite":
        return {}
    return {"TAPEBOT_DATABASE_URL": await fresh_postgres()}


@pytest.fixture
async def harness(tmp_path, database_env):
    api = FakeBotAPI()
    h = Harness(tmp_path / "home", api, ScriptedClient(), extra_env=database_env)
    yield h
    await h.stop()
