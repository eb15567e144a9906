"""`tapebot db upgrade` and `tapebot usage` in-process, on a real SQLite file under TAPEBOT_HOME."""

from __future__ import annotations

import sqlite3

from agent.ports import UsageRecord
from agent.usage import Usage
from bot import cli
from memory.db import Database
from memory.stores import SqlStore


def test_db_upgrade_needs_no_model(tmp_path, monkeypatch, capsys):
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    home = tmp_path / "home"
    assert cli.main(["--home", str(home), "db", "upgrade"]) == 0
    out = capsys.readouterr().out
    assert "is at revision" in out
    con = sqlite3.connect(home / "tapebot.db")
    try:
        tables = {r[0] for r in con.execute("select name from sqlite_master where type='table'")}
    finally:
        con.close()
    assert {"sessions", "messages", "turns", "approvals", "usage"} <= tables
    assert (home / "traces").is_dir() and (home / "workspace").is_dir()


async def _seed(url: str) -> None:
    async with Database(url) as db:
        store = SqlStore(db)
        await store.record_usage(
            UsageRecord(
                session_id="s", turn_id="t1", model="main", usage=Usage(1200, 300, 4000, 100), cost=0.0123
            )
        )
        await store.record_usage(
            UsageRecord(session_id="s", turn_id="t2", model="main", usage=Usage(800, 200), cost=0.01)
        )
        await store.record_usage(
            UsageRecord(session_id="s", turn_id="t2", model="backup", usage=Usage(50, 5), cost=0.0)
        )


def test_usage_prints_totals_per_model(tmp_path, monkeypatch, capsys):
    import asyncio

    home = tmp_path / "home"
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    asyncio.run(_seed(f"sqlite+aiosqlite:///{home / 'tapebot.db'}"))
    assert cli.main(["--home", str(home), "usage", "--days", "7"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == "usage over the last 7 days"
    assert lines[1].split() == [
        "model",
        "turns",
        "input",
        "output",
        "cache",
        "read",
        "cache",
        "write",
        "cost",
    ]
    rows = {line.split()[0]: line.split()[1:] for line in lines[3:] if not line.startswith("-")}
    assert rows["main"] == ["2", "2,000", "500", "4,000", "100", "0.0223"]
    assert rows["backup"] == ["1", "50", "5", "0", "0", "0.0000"]
    assert rows["total"] == ["2", "2,050", "505", "4,000", "100", "0.0223"]


def test_usage_with_nothing_recorded(tmp_path, capsys):
    assert cli.main(["--home", str(tmp_path / "h"), "usage"]) == 0
    assert capsys.readouterr().out.strip() == "no model usage recorded in the last 30 days"


def test_usage_rejects_bad_days(tmp_path, capsys):
    import pytest

    with pytest.raises(SystemExit) as info:
        cli.main(["--home", str(tmp_path), "usage", "--days", "0"])
    assert info.value.code == 2
