"""`PaperBroker.precheck` (what an approval card warns about) agrees with what `submit` then does:
for any sequence of orders, precheck names a rejection exactly when submit rejects, with the same
reason, and never writes anything itself."""

from __future__ import annotations

import asyncio
import itertools

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from markets_helpers import make_sessions

from markets.broker import PaperBroker
from markets.data import MarketData

MD = MarketData()
ORDERS = st.lists(
    st.tuples(
        st.sampled_from(["600519", "000001"]),
        st.sampled_from(["buy", "sell"]),
        st.sampled_from([0, 50, 100, 150, 200, 300, 1000, 10_000]),
    ),
    min_size=1,
    max_size=6,
)
_dirs = itertools.count()


async def scenario(tmp_path, orders) -> None:
    folder = tmp_path / f"db{next(_dirs)}"
    folder.mkdir()
    engine, sessions = await make_sessions(folder)
    try:
        broker = PaperBroker(sessions, MD)
        for i, (code, side, qty) in enumerate(orders):
            before = await broker.portfolio.trades("u1")
            problem = await broker.precheck("u1", code, side, qty)
            assert await broker.portfolio.trades("u1") == before  # nothing placed
            result = await broker.submit("u1", code, side, qty, key=f"k{i}")
            if problem is None:
                assert result.status == "filled", result.trade
            elif problem.kind != "limit":
                assert result.status == "rejected" and result.trade["reason"] == problem.text
    finally:
        await engine.dispose()


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ORDERS)
def test_precheck_names_a_rejection_exactly_when_submit_rejects(tmp_path, orders):
    asyncio.run(scenario(tmp_path, orders))


async def test_a_sell_of_shares_bought_this_session_is_a_t1_problem(tmp_path):
    engine, sessions = await make_sessions(tmp_path)
    try:
        broker = PaperBroker(sessions, MD)
        await broker.submit("u1", "600519", "buy", 100, key="b")
        problem = await broker.precheck("u1", "600519", "sell", 100)
        assert problem is not None and problem.kind == "t_plus_1" and problem.figures["sellable"] == 0
    finally:
        await engine.dispose()
