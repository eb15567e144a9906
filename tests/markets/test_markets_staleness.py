"""Every number carries its date and age: "as of 2025-09-03 (459 days old)" in tool results, the
source line, trade cards, /status and the brief's header (the clock injected)."""

from __future__ import annotations

from datetime import UTC, date, datetime

from hypothesis import given
from hypothesis import strategies as st

from markets.staleness import age_days, age_text, data_dates, dated

NOW = datetime(2026, 12, 6, 3, 0, tzinfo=UTC)  # 11:00 in Shanghai


def test_the_bundled_dates_ages():
    assert dated(date(2025, 9, 3), NOW) == "2025-09-03 (459 days old)"
    assert dated(date(2025, 9, 3), NOW, lang="zh") == "2025-09-03（459 天前）"
    assert dated(date(2026, 12, 6), NOW) == "2026-12-06 (today)"
    assert dated(date(2026, 12, 5), NOW) == "2026-12-05 (1 day old)"
    line = data_dates({"cn": date(2025, 9, 3), "crypto": date(2025, 7, 13)}, NOW)
    assert line == "A-shares as of 2025-09-03 (459 days old); BTC/ETH as of 2025-07-13 (511 days old)"
    assert (
        data_dates({"cn": None, "crypto": date(2026, 12, 6)}, NOW, "zh") == "BTC/ETH 截至 2026-12-06（今天）"
    )


def test_the_markets_own_date_counts():
    late_utc = datetime(2026, 12, 5, 17, 0, tzinfo=UTC)  # already 12-06 01:00 in Shanghai
    assert age_days(date(2026, 12, 5), late_utc, "cn") == 1
    assert age_days(date(2026, 12, 5), late_utc, "crypto") == 0


@given(st.dates(min_value=date(2000, 1, 1), max_value=date(2030, 1, 1)))
def test_age_is_never_negative_and_matches_the_words(day):
    n = age_days(day, NOW)
    assert n >= 0
    assert age_text(day, NOW) in ("today", "1 day old", f"{n} days old")


async def test_price_and_source_say_how_old(tmp_path):
    from agent.tools.registry import Deps, ToolContext
    from markets.data import MarketData
    from markets.services import MarketServices
    from markets.tools import market_tools

    svc = MarketServices(data=MarketData(), results_dir=tmp_path, clock=lambda: NOW)
    ctx = ToolContext(user_id="u1", deps=Deps(svc))
    price = await market_tools.get("get_market_price").call(ctx, {"code": "600519"})
    assert price["as_of"] == "2025-09-03" and price["age_days"] == 459
    assert price["note"].startswith("last close as of 2025-09-03 (459 days old)")
    overview = await market_tools.get("get_market_overview").call(ctx, {})
    assert "as of 2025-09-03 (459 days old)" in overview["source"]
    assert svc.data_dates("en").startswith("A-shares as of 2025-09-03 (459 days old)")
