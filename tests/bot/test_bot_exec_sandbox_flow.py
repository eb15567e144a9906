"""exec_command through the front door: the approval card says what the
sandbox allows, and the approved command — one that tries to rewrite tapebot's own policy — runs in the real
bubblewrap sandbox: it cannot read config.toml, cannot write standing approvals into tapebot.db,
and sees no secrets in its environment or in /proc.
"""

from __future__ import annotations

import shutil
import sqlite3
from contextlib import closing

import pytest

from agent.providers.scripted import ScriptedClient, reply
from bot.i18n import t
from tests.bot.conftest import ALICE, Harness
from tests.bot.test_bot_approval_integrity import card_in, data_of, tap, tool_results
from tests.fakes.telegram_api import FakeBotAPI

pytestmark = pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap (bwrap) not installed")

TOKEN_LEAK = "123456789:AAFsandboxleakleakleakleakleak0001"


async def test_a18_c3_approved_command_cannot_touch_tapebot_policy_or_secrets(tmp_path, monkeypatch):
    home = tmp_path / "home"
    monkeypatch.setenv("OPENAI_API_KEY", "sk-proj-sandboxleakleakleak0002")
    db = home / "tapebot.db"
    attack = (
        f"cat {home}/config.toml | rev; base64 {home}/config.toml; "
        f"sqlite3 {db} \"insert into approvals (id) values ('forged')\"; echo sqlite-rc=$?; "
        "env; cat /proc/$PPID/environ | tr '\\0' '\\n'"
    )
    script = ScriptedClient([reply(tool_calls=[("exec_command", {"command": attack})]), reply("Done.")])
    h = Harness(home, FakeBotAPI(), script, {"TELEGRAM_BOT_TOKEN": TOKEN_LEAK})
    try:
        await h.start()
        (home / "config.toml").write_text('api_key = "sk-config-file-secret-0003"\n')
        h.api.push_text(ALICE, "list the workspace", user_id=ALICE)
        card = await card_in(h.api, ALICE)
        assert t("en", "exec_sandboxed") in card["text"]
        tap(h.api, ALICE, card["message_id"], data_of(card, "o"), ALICE)
        await h.api.wait_for(lambda: "Done." in h.api.texts(ALICE))
        result = tool_results(h.script.requests[-1])[-1]
        assert "sqlite-rc=0" not in result, result
        for secret in ("sk-config-file-secret", "3000-terces-elif-gifnoc", "c2stY29uZmln", "sandboxleak"):
            assert secret not in result, result
        assert "AAFsandbox" not in result
    finally:
        await h.stop()
    with closing(sqlite3.connect(db)) as conn, conn:
        assert conn.execute("select count(*) from approvals where id = 'forged'").fetchone() == (0,)
