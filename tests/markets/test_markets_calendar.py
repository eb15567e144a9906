"""The trading calendar outside its known range: warnings instead of silent
guesses, a newer file dropped into $TAPEBOT_HOME/data, and `tapebot data update-calendar` from akshare
(faked at the akshare function boundary with a response of the real shape)."""

from __future__ import annotations

import io
import json
import sys
import types
from datetime import UTC, date, datetime
from types import SimpleNamespace

import pytest
from hypothesis import given
from hypothesis import strategies as st
from markets_helpers import DATA

from bot import cli
from markets.calendar import CALENDAR_FILE, TradingCalendar, update_calendar
from markets.data import MarketData

AK = json.loads((DATA / "akshare_trade_date_hist_sina.json").read_text())


class FakeFrame:
    """Stands in for the pandas DataFrame akshare returns: `frame["trade_date"]` iterates dates."""

    def __init__(self, days: list[str]):
        self.cols = {"trade_date": [date.fromisoformat(d) for d in days]}

    def __getitem__(self, key: str):
        return self.cols[key]


def fake_akshare(days: list[str] | None = None):
    mod = types.ModuleType("akshare")
    mod.tool_trade_date_hist_sina = lambda: FakeFrame(days or AK["trade_date"])  # type: ignore[attr-defined]
    return mod


def test_outside_the_bundled_range_warns():
    cal = TradingCalendar.sse()
    assert cal.last == date(2026, 12, 31)
    assert cal.warning(date(2026, 6, 1)) is None
    soon = cal.warning(date(2026, 12, 15))
    assert soon and "ends 2026-12-31" in soon and "16 days" in soon
    out = cal.warning(date(2027, 1, 1))
    assert out and "2027-01-01" in out and "update-calendar" in out and "cn_trade_calendar.json" in out
    assert TradingCalendar.crypto().warning(date(2030, 1, 1)) is None


def test_the_warning_in_chinese():
    """/status shows the warning in the chat's language."""
    cal = TradingCalendar.sse()
    soon = cal.warning(date(2026, 12, 15), lang="zh")
    assert soon and soon.startswith("SSE 交易日历只到 2026-12-31") and "还剩 16 天" in soon
    out = cal.warning(date(2027, 1, 1), lang="zh")
    assert out and "2027-01-01 不在其中" in out and "tapebot data update-calendar" in out and "节假日" in out
    assert cal.warning(date(2026, 6, 1), lang="zh") is None


def test_a_newer_file_in_the_data_folder_overrides_the_bundled_one(tmp_path):
    (tmp_path / CALENDAR_FILE).write_text(json.dumps(["2026-12-31", "2027-01-04", "2027-01-05"]))
    cal = TradingCalendar.sse(tmp_path)
    assert cal.last == date(2027, 1, 5) and str(tmp_path) in cal.source
    assert not cal.is_trading_day(date(2027, 1, 1)) and cal.is_trading_day(date(2027, 1, 4))
    assert MarketData(calendar_dir=tmp_path).calendar("cn").last == date(2027, 1, 5)
    (tmp_path / CALENDAR_FILE).write_text("not json")
    with pytest.raises(ValueError, match=r"cn_trade_calendar\.json"):
        TradingCalendar.sse(tmp_path)


def test_update_calendar_from_akshare_merges_and_writes(tmp_path):
    res = update_calendar(tmp_path, akshare=fake_akshare())
    assert res.last == date(2027, 1, 29) and res.added == 20  # the weekdays 2027-01-04 … 01-29
    cal = TradingCalendar.sse(tmp_path)
    assert cal.first == date(1990, 12, 19)  # the fetched tail is merged onto the known history
    assert not cal.is_trading_day(date(2027, 1, 1)) and cal.is_trading_day(date(2027, 1, 4))
    assert "outside" not in (cal.warning(date(2027, 1, 4)) or "")  # inside now (ends in 25 days)
    assert cal.warning(date(2026, 11, 2)) is None


def test_update_calendar_refuses_a_response_that_does_not_reach_the_known_end(tmp_path):
    with pytest.raises(ValueError, match="ends 2026-12-04"):
        update_calendar(tmp_path, akshare=fake_akshare(["2026-12-01", "2026-12-04"]))
    assert not (tmp_path / CALENDAR_FILE).exists()


def test_cli_update_calendar(tmp_path, monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "akshare", fake_akshare())
    code = cli.main(["--home", str(tmp_path), "data", "update-calendar"])
    out, err = capsys.readouterr()
    assert code == 0, err
    assert "2027-01-29" in out and (tmp_path / "data" / CALENDAR_FILE).is_file()


def test_cli_update_calendar_without_akshare(tmp_path, monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "akshare", None)  # import fails as if not installed
    code = cli.main(["--home", str(tmp_path), "data", "update-calendar"])
    _out, err = capsys.readouterr()
    assert code == 1 and "pip install akshare pandas" in err


def test_config_check_warns_outside_the_calendar(tmp_path, monkeypatch):
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test-0000")
    out = io.StringIO()
    ctx = cli.CliContext(
        home=tmp_path,
        stdout=out,
        now=lambda: datetime(2027, 1, 4, 1, tzinfo=UTC),
        environ={"ANTHROPIC_API_KEY": "k"},
    )
    assert cli.cmd_config_check(ctx) == 0
    assert "# WARNING: the SSE trading calendar" in out.getvalue()
    update_calendar(tmp_path / "data", akshare=fake_akshare())
    out2 = io.StringIO()
    ctx2 = cli.CliContext(
        home=tmp_path,
        stdout=out2,
        now=lambda: datetime(2027, 1, 4, 1, tzinfo=UTC),
        environ={"ANTHROPIC_API_KEY": "k"},
    )
    assert cli.cmd_config_check(ctx2) == 0
    assert "is outside it" not in out2.getvalue() and "ends 2027-01-29" in out2.getvalue()


async def test_status_and_brief_carry_the_warning():
    from bot.briefs import BriefRunner
    from bot.commands.background import StatusExtras
    from markets.services import MarketServices

    app = SimpleNamespace(
        task_manager=None, schedules=None, mcp=None, skills=None, market=MarketServices(data=MarketData())
    )
    late = datetime(2027, 1, 4, 1, tzinfo=UTC)
    status_extra = StatusExtras(calendar_warning=app.market.calendar_warning)
    assert "trading calendar ends 2026-12-31" in "\n".join(await status_extra("k", "s", "en", now=late))
    assert not await status_extra("k", "s", "en", now=datetime(2026, 6, 1, tzinfo=UTC))

    async def deliver(chat_key: str, text: str) -> None: ...

    def runner(now: datetime) -> BriefRunner:
        return BriefRunner(
            SimpleNamespace(deliver=deliver), calendar_warning=app.market.calendar_warning, now=lambda: now
        )

    assert "trading calendar ends 2026-12-31" in runner(late).brief_text()
    assert "calendar" not in runner(datetime(2026, 6, 1, tzinfo=UTC)).brief_text()


async def test_market_overview_tool_carries_the_warning():
    from agent.tools.registry import Deps, ToolContext
    from markets.services import MarketServices
    from markets.tools import market_tools

    svc = MarketServices(data=MarketData(), clock=lambda: datetime(2027, 1, 4, 1, tzinfo=UTC))
    out = await market_tools.get("get_market_overview").call(ToolContext(deps=Deps(svc)), {})
    assert "is outside it" in out["calendar_warning"]


def test_scheduler_calendar_logs_days_outside_the_range(caplog):
    from bot.parts import warned_trading_days

    is_trading = warned_trading_days(TradingCalendar.sse())
    assert not is_trading(date(2026, 10, 1)) and "outside" not in caplog.text
    assert not is_trading(date(2027, 1, 1))  # New Year's Day: a fixed holiday, even beyond the range
    assert is_trading(date(2027, 1, 4))  # a weekday guess …
    assert "2027-01-04 is outside it" in caplog.text  # … that is logged, not silent


def test_beyond_the_bundled_range_fixed_holidays_are_closed():
    cal = TradingCalendar.sse()
    assert cal.last == date(2026, 12, 31)
    assert not cal.is_trading_day("2027-01-01")  # a Friday, New Year's Day
    assert cal.next_trading_day("2026-12-31") == date(2027, 1, 4)
    assert not cal.is_trading_day("2027-05-01") and cal.is_trading_day("2027-05-03")
    # National Day: 2027-10-01 is a Friday, 4–7 October are Monday–Thursday
    assert cal.next_trading_day("2027-09-30") == date(2027, 10, 8)
    assert cal.trading_days("2027-10-01", "2027-10-08") == [date(2027, 10, 8)]


@pytest.mark.parametrize("year", range(2009, 2027))
def test_the_fixed_holiday_guess_never_closes_a_real_session(year):
    # a calendar that ends the year before guesses the year from weekdays and fixed holidays:
    # every real session of that year is still a session, and each fixed holiday is closed
    full = TradingCalendar.sse()
    known = [d for d in full._days if d.year < year]
    cut = TradingCalendar(known, fixed_holidays=full.fixed_holidays)
    real = set(full.trading_days(f"{year}-01-01", f"{year}-12-31"))
    guessed = set(cut.trading_days(f"{year}-01-01", f"{year}-12-31"))
    assert real <= guessed
    for month, day in full.fixed_holidays:
        assert date(year, month, day) not in guessed


NAIVE_FROM, NAIVE_TO = datetime(2024, 1, 1), datetime(2027, 12, 31)  # noqa: DTZ001 — hypothesis bounds are naive


@given(st.datetimes(min_value=NAIVE_FROM, max_value=NAIVE_TO, timezones=st.just(UTC)))
def test_session_of_is_today_only_before_the_close_on_a_trading_day(now):
    from markets.calendar import EXCHANGE_TZ, SSE_CLOSE

    cal = TradingCalendar.sse()
    local = now.astimezone(EXCHANGE_TZ)
    s = cal.session_of(now)
    assert cal.is_trading_day(s) and s >= local.date()
    if cal.is_trading_day(local.date()) and local.time() < SSE_CLOSE:
        assert s == local.date()
    else:
        assert s == cal.next_trading_day(local.date())
