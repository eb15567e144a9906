"""`tapebot memory list/search/forget/trace` end to end: memories seeded with `MemoryStore` into a
real SQLite database (created and migrated by `memory.db.Database`) under a temporary home, read
back through `bot.cli.main([...])` in-process — and once through the real `python -m bot.cli`."""

from __future__ import annotations

import asyncio
import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from agent.messages import Message
from bot.cli import main
from memory.db import Database
from memory.longterm import MemoryStore
from memory.stores import SqlStore

ROOT = Path(__file__).resolve().parents[2]
ALICE, BOB = "1001", "2002"
SESSION = "telegram:1001#abc123"


@dataclass
class Seeded:
    home: Path
    rule: int  # Alice's preference, extracted from SESSION
    stop: int  # Alice's decision about 600519
    playbook: int  # Alice's L2 playbook distilled from the two above
    bob: int  # Bob's preference
    shared: int  # a preference in the "default" scope


async def _seed(home: Path) -> Seeded:
    home.mkdir(parents=True, exist_ok=True)
    async with Database(f"sqlite+aiosqlite:///{home / 'tapebot.db'}") as db:  # migrated schema
        sessions = SqlStore(db)
        await sessions.get_or_create_session(SESSION, chat_key="telegram:1001", user_id=ALICE)
        await sessions.append_messages(
            SESSION,
            [
                Message.user("I never buy at the open; no position above 15%."),
                Message.assistant("Noted."),
            ],
        )
        store = MemoryStore(db)
        rule = await store.add(
            ALICE,
            "preference",
            "never buy at the open; no position above 15%",
            source_ref=f"chat_log:{SESSION}",
        )
        stop = await store.add(ALICE, "decision", "600519 跌破确认支撑不买", source_ref=f"chat_log:{SESSION}")
        playbook = await store.add(
            ALICE,
            "playbook",
            "开盘不追；回踩确认后分批建仓，单票不超过15%",
            source_kind="layer_refresh",
            meta={"source_l1_ids": [rule.id, stop.id]},
        )
        bob = await store.add(BOB, "preference", "prefers dividend stocks over growth")
        shared = await store.add("default", "preference", "buy only after a second close above the pivot")
    return Seeded(home, rule.id, stop.id, playbook.id, bob.id, shared.id)


@pytest.fixture
def seeded(tmp_path, monkeypatch) -> Seeded:
    for name in list(os.environ):
        if name.startswith("TAPEBOT_"):
            monkeypatch.delenv(name)
    return asyncio.run(_seed(tmp_path / "home"))


def cli(seeded: Seeded, capsys, *args: str) -> tuple[int, str, str]:
    code = main(["--home", str(seeded.home), "memory", *args])
    out = capsys.readouterr()
    return code, out.out, out.err


def test_list_shows_every_scope_newest_first(seeded, capsys):
    code, out, err = cli(seeded, capsys)  # no action = list
    assert code == 0, err
    lines = out.strip().splitlines()
    ids = [int(re.match(r"#(\d+) ", line).group(1)) for line in lines]
    assert ids == [seeded.shared, seeded.bob, seeded.playbook, seeded.stop, seeded.rule]
    assert lines[-1].endswith(f"L1/preference never buy at the open; no position above 15%  ({ALICE})")
    assert "L1/decision [600519] 600519 跌破确认支撑不买" in lines[3]  # codes resolved from the content
    assert lines[1].endswith(f"({BOB})") and lines[0].endswith("(default)")


def test_list_filters_by_type_and_limit(seeded, capsys):
    _, out, _ = cli(seeded, capsys, "list", "--type", "decision")
    assert out.count("\n") == 1 and f"#{seeded.stop} " in out
    _, out, _ = cli(seeded, capsys, "list", "--type", "playbook")
    assert out.count("\n") == 1 and f"#{seeded.playbook} 20" in out and "L2/playbook" in out
    _, out, _ = cli(seeded, capsys, "list", "--limit", "2")
    assert out.count("\n") == 2 and f"#{seeded.shared} " in out and f"#{seeded.bob} " in out


def test_search_without_scope_searches_every_scope(seeded, capsys):
    code, out, _ = cli(seeded, capsys, "search", "second", "close", "above", "the", "pivot")
    assert code == 0
    assert "buy only after a second close above the pivot" in out and "(default)" in out
    _, out, _ = cli(seeded, capsys, "search", "dividend")
    assert "prefers dividend stocks over growth" in out and f"({BOB})" in out
    assert "pivot" not in out  # ranked by the query: what does not match stays out


def test_search_with_scope_ranks_that_users_memories(seeded, capsys):
    code, out, _ = cli(seeded, capsys, "--scope", ALICE, "search", "should I buy 600519 at the open")
    assert code == 0
    assert "never buy at the open" in out and "跌破确认支撑不买" in out and "dividend" not in out


def test_list_with_scope_shows_one_user(seeded, capsys):
    code, out, _ = cli(seeded, capsys, "--scope", BOB, "list")
    assert code == 0 and out.count("\n") == 1 and "dividend" in out


def test_scope_guards_forget(seeded, capsys):
    code, out, _ = cli(seeded, capsys, "--scope", BOB, "forget", str(seeded.rule))
    assert code == 1 and out.strip() == f"no memory #{seeded.rule}"


def test_trace_shows_the_source_messages_and_the_distilled_from(seeded, capsys):
    code, out, _ = cli(seeded, capsys, "trace", str(seeded.rule))
    assert code == 0
    assert f"source: chat_log:{SESSION} (user)" in out
    assert re.search(r"user said \(\d+% overlap\): I never buy at the open; no position above 15%\.", out)
    code, out, _ = cli(seeded, capsys, "trace", str(seeded.playbook))
    assert code == 0 and "(layer_refresh)" in out
    assert f"from #{seeded.rule} " in out and f"from #{seeded.stop} " in out


def test_forget_deletes_one_memory(seeded, capsys):
    code, out, _ = cli(seeded, capsys, "forget", str(seeded.rule))
    assert code == 0 and out.startswith(f"forgot #{seeded.rule} ") and "never buy" in out
    _, out, _ = cli(seeded, capsys, "list")
    assert "never buy" not in out and out.count("\n") == 4
    code, out, _ = cli(seeded, capsys, "forget", str(seeded.rule))
    assert code == 1 and out.strip() == f"no memory #{seeded.rule}"
    # the playbook distilled from it now traces to a deleted source
    _, out, _ = cli(seeded, capsys, "trace", str(seeded.playbook))
    assert f"from #{seeded.rule} (deleted)" in out


def test_real_command_line(seeded):
    env = {k: v for k, v in os.environ.items() if not k.startswith("TAPEBOT_") and not k.endswith("_API_KEY")}
    env["TAPEBOT_HOME"] = str(seeded.home)
    r = subprocess.run(
        [sys.executable, "-m", "bot.cli", "memory", "list", "--type", "preference", "--limit", "1"],
        env=env,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert r.returncode == 0, r.stderr
    assert r.stdout.count("\n") == 1
    assert r.stdout.startswith(f"#{seeded.shared} ") and r.stdout.strip().endswith("(default)")


def test_list_on_an_empty_store_says_there_are_none(tmp_path, monkeypatch, capsys):
    for name in list(os.environ):
        if name.startswith("TAPEBOT_"):
            monkeypatch.delenv(name)
    home = tmp_path / "empty"
    assert main(["--home", str(home), "db", "upgrade"]) == 0
    capsys.readouterr()
    assert main(["--home", str(home), "memory", "list"]) == 0
    assert capsys.readouterr().out.strip() == "(no memories yet: they are saved as you chat)"
    assert main(["--home", str(home), "memory", "--scope", "telegram:1", "list", "--type", "decision"]) == 0
    assert "no memories of type decision in scope telegram:1" in capsys.readouterr().out
