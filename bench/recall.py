"""Recall latency and precision.

    python -m bench.recall [--sizes 1000,10000,100000] [--queries 60] [--runs 5]

For each size, a SQLite database (real file, FTS5 trigram + scoped LIKE indexes) is filled with that
many memories spread over 1,000 users (100 each, as the per-type caps allow), plus a labelled user
whose ~40 planted memories (global rules and single-stock rules for 8 stocks) sit among generic
filler. A second layout puts every memory in one scope (uncapped stress). We time
`MemoryRecall.recall` (all three searches, scoping, decay, pinning, layout) for the labelled user and
report p50/p95 (each the median over `--runs` passes of the query set), then precision on the labelled query set:

- scope precision: share of recalled single-stock memories that belong to a stock the question
  names (the 比亚迪 / 宁德时代 rule; must be 1.0),
- precision@k: share of recalled (ranked, non-pinned) memories labelled relevant to the query
  (for a question naming stocks, every memory about those stocks counts as relevant),
- recall@k: share of the labelled relevant memories that were recalled.

Prints figures; asserts nothing.

2026-12-04 (load below 1): p95 4.81 ms at 100,000 memories over 1,000 users, 12.1 ms with all
100,000 in one scope (targets < 20 and < 50 ms); scope precision 1.00, P@k 0.90 / 0.80.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import statistics
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench._env import add_runs_arg, footer, header
from memory.db import Database
from memory.longterm import MemoryStore, create_memory_schema, scope_tag
from memory.recall import MemoryRecall
from memory.terms import extract_codes

STOCKS = {
    "比亚迪": "002594", "宁德时代": "300750", "贵州茅台": "600519", "平安银行": "000001",
    "长信科技": "300088", "紫金矿业": "601899", "隆基绿能": "601012", "中国平安": "601318",
}  # fmt: skip
OTHER_CODES = [f"{600000 + i:06d}" for i in range(100, 400)]
USER = "labelled-user"

# (key, type, content, stock or None). Keys label relevance below.
PLANTED = [
    ("g_support", "decision", "当天跌破确认支撑不买", None),
    ("g_volume", "decision", "极端放量但冲高回落不买", None),
    ("g_open", "preference", "用户不想开盘买入，避免影响一天心情", None),
    ("g_tail", "preference", "用户偏好尾盘二次确认后再买", None),
    ("g_size", "preference", "单票仓位不超过15%", None),
    ("g_chase", "decision", "连续涨停后不追涨", None),
    ("g_st", "decision", "不碰ST和退市风险股", None),
    ("g_friday", "decision", "周五下午不开新仓", None),
    (
        "p_tail",
        "playbook",
        "尾盘二次确认买入：14:45 后检查支撑、VWAP、收盘位置和量能；跌破确认支撑时禁止买入",
        None,
    ),
    ("p_pullback", "playbook", "缩量回踩确认：量能萎缩到均量一半以下、回踩不破前低再分批建仓", None),
    ("persona", "persona", "用户重视本金安全和情绪稳定，偏好二次确认，不喜欢开盘冲动交易", None),
]
for name, code in STOCKS.items():
    PLANTED += [
        (f"{code}_build", "decision", f"{name}回踩20日线不破再考虑建仓", name),
        (f"{code}_stop", "decision", f"{name}跌破前低坚决止损，不补仓", name),
        (f"{code}_size", "decision", f"{name}仓位最多一成，业绩前不加仓", name),
    ]

# (query, relevant keys). Pinned persona/preferences are excluded from precision (always shown).
QUERIES = [
    ("我想建仓比亚迪", {"002594_build", "002594_size", "p_pullback"}),
    ("比亚迪跌破前低了怎么办", {"002594_stop", "g_support"}),
    ("宁德时代现在可以建仓吗", {"300750_build", "300750_size", "p_pullback"}),
    ("宁德时代跌破前低要止损吗", {"300750_stop", "g_support"}),
    ("贵州茅台 600519 仓位能加到多少", {"600519_size", "g_size"}),
    ("平安银行回踩20日线了", {"000001_build", "p_pullback"}),
    ("长信科技要不要止损", {"300088_stop"}),
    ("紫金矿业仓位多少合适", {"601899_size", "g_size"}),
    ("隆基绿能回踩了能买吗", {"601012_build", "p_pullback"}),
    ("中国平安跌破前低", {"601318_stop", "g_support"}),
    ("今天跌破确认支撑还能买吗", {"g_support", "p_tail"}),
    ("放量冲高回落能不能买", {"g_volume"}),
    ("尾盘二次确认怎么做", {"p_tail", "g_tail"}),
    ("连续涨停要不要追", {"g_chase"}),
    ("ST股能买吗", {"g_st"}),
    ("周五下午能开新仓吗", {"g_friday"}),
    ("缩量回踩怎么确认", {"p_pullback"}),
    ("我想建仓科技股", set()),  # a sector word: no single-stock memory may come back
    ("白酒板块能买吗", set()),
    (
        "比亚迪和宁德时代哪个更适合建仓",
        {"002594_build", "300750_build", "002594_size", "300750_size", "p_pullback"},
    ),
]

FILLER_TOPICS = [
    "关注板块轮动节奏，{a}",
    "宏观数据公布前降低风险敞口，{a}",
    "复盘时记录情绪变化，{a}",
    "可转债只做低溢价，{a}",
    "指数期货贴水扩大时谨慎，{a}",
    "北向资金连续流出时观望，{a}",
    "财报季前控制总仓位，{a}",
    "避免在消息面发酵初期入场，{a}",
]
FILLER_TAILS = [
    "保持纪律",
    "记录理由",
    "不要情绪化",
    "先看大盘",
    "等待确认",
    "分批操作",
    "控制回撤",
    "留足现金",
]


def resolver(text: str) -> list[str]:
    codes = extract_codes(text)
    for name in sorted(STOCKS, key=len, reverse=True):
        if name in text:
            codes.append(STOCKS[name])
    return list(dict.fromkeys(codes))


def filler(rng: random.Random, i: int) -> tuple[str, str, str]:
    topic = rng.choice(FILLER_TOPICS).format(a=rng.choice(FILLER_TAILS))
    kind = rng.choice(["decision", "decision", "preference", "playbook"])
    if rng.random() < 0.5:
        code = rng.choice(OTHER_CODES)
        return kind, f"{code} {topic}（{i}）", code
    return kind, f"{topic}（{i}）", ""


async def fill(db: Database, size: int, *, users: int, seed: int = 7) -> dict[str, int]:
    """Bulk insert (bypassing per-type caps) and return planted key → id."""
    rng = random.Random(seed)
    now = datetime(2026, 6, 1, tzinfo=UTC)
    rows = []
    planted_rows = []
    for key, kind, content, stock in PLANTED:
        code = STOCKS[stock] if stock else ""
        planted_rows.append((key, (USER, kind, content, code)))
    n_filler = max(0, size - len(PLANTED))
    per_user_filler = max(1, n_filler // users)
    for i in range(n_filler):
        kind, content, code = filler(rng, i)
        scope = USER if users == 1 else f"user{i // per_user_filler}"
        if users > 1 and i < 60:
            scope = USER  # the labelled user also has some filler
        rows.append((scope, kind, content, code))
    ids: dict[str, int] = {}
    level = {"preference": "L1", "decision": "L1", "playbook": "L2", "persona": "L3"}
    async with db.engine.begin() as conn:
        raw = await conn.get_raw_connection()
        driver = raw.driver_connection

        def values(scope, kind, content, code, age):
            created = (now - timedelta(days=age)).replace(tzinfo=None).isoformat(sep=" ")
            return (
                scope,
                kind,
                level[kind],
                content,
                code,
                scope_tag(scope),
                "bench",
                "user",
                0.8,
                "{}",
                created,
                created,
            )

        sql = (
            "INSERT INTO memories (scope, memory_type, level, content, codes, scope_tag, source_ref, source_kind,"
            " confidence, meta, created_at, updated_at) VALUES (?,?,?,?,?,?,?,?,?,?,?,?)"
        )
        # bulk load through the plain sqlite3 connection under the driver (inline or aiosqlite)
        conn = getattr(driver, "_conn", None) or driver
        conn.executemany(sql, [values(*r, rng.randint(0, 40)) for r in rows])
        for key, r in planted_rows:
            ids[key] = conn.execute(sql, values(*r, 1)).lastrowid
        conn.execute(
            "INSERT INTO memory_codes (memory_id, code, scope) SELECT id, codes, scope FROM memories WHERE codes != ''"
        )
    return ids


async def run_size(size: int, users: int, n_queries: int, runs: int = 5) -> dict[str, float]:
    with tempfile.TemporaryDirectory() as tmp:
        db = Database(f"sqlite+aiosqlite:///{Path(tmp) / 'bench.db'}", migrate=False)
        await db.start()
        try:
            await create_memory_schema(db)
            t0 = time.perf_counter()
            ids = await fill(db, size, users=users)
            fill_s = time.perf_counter() - t0
            store = MemoryStore(db, code_resolver=resolver)
            recall = MemoryRecall(store, code_resolver=resolver, clock=_Clock())
            key_of = {v: k for k, v in ids.items()}
            for _ in range(3):  # warm-up
                await recall.recall(USER, QUERIES[0][0])
            latencies, scope_ok, scope_total = [], 0, 0
            hits = relevant_total = found_relevant = returned = 0
            stock_keys = {
                code: {k for k, _t, _c, st in PLANTED if st and STOCKS[st] == code}
                for code in STOCKS.values()
            }
            p50s, p95s = [], []
            for run in range(runs):  # the same query set `runs` times: median of each run's p50/p95
                latencies = []
                for i in range(n_queries):
                    query, relevant = QUERIES[i % len(QUERIES)]
                    t = time.perf_counter()
                    result = await recall.recall(USER, query)
                    latencies.append((time.perf_counter() - t) * 1000)
                    if run or i >= len(QUERIES):
                        continue
                    qcodes = set(resolver(query))
                    # Every memory about a stock the question names is relevant context for it.
                    relevant = set(relevant).union(*(stock_keys.get(c, set()) for c in qcodes))
                    for item in result.ranked:
                        codes = set(item.record.codes)
                        if codes:
                            scope_total += 1
                            scope_ok += bool(codes & qcodes)
                        key = key_of.get(item.record.id)
                        if key in ("persona",) or (
                            item.record.memory_type == "preference" and key and key.startswith("g_")
                        ):
                            continue
                        returned += 1
                        hits += key in relevant
                    recalled_keys = {key_of.get(r.id) for r in result.pinned} | {
                        key_of.get(i.record.id) for i in result.ranked
                    }
                    relevant_total += len(relevant)
                    found_relevant += len(relevant & recalled_keys)
                latencies.sort()
                p50s.append(statistics.median(latencies))
                p95s.append(latencies[max(0, int(len(latencies) * 0.95) - 1)])
            return {
                "size": size,
                "fill_s": fill_s,
                "p50_ms": statistics.median(p50s),
                "p95_ms": statistics.median(p95s),
                "scope_precision": scope_ok / scope_total if scope_total else 1.0,
                "precision": hits / returned if returned else 1.0,
                "recall": found_relevant / relevant_total if relevant_total else 1.0,
            }
        finally:
            await db.close()


class _Clock:
    def now(self) -> datetime:
        return datetime(2026, 6, 1, tzinfo=UTC)


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", default="1000,10000,100000")
    parser.add_argument("--queries", type=int, default=60)
    add_runs_arg(parser)
    args = parser.parse_args()
    header("recall")
    sizes = [int(s) for s in args.sizes.split(",")]
    print(
        "recall latency (MemoryRecall.recall, SQLite file, FTS5 trigram + scoped LIKE) and labelled precision"
    )
    print(
        f"{'layout':<22}{'memories':>10}{'fill s':>8}{'p50 ms':>9}{'p95 ms':>9}{'scope P':>9}{'P@k':>7}{'R@k':>7}"
    )
    for layout, users in (("1,000 users", 1000), ("one scope (stress)", 1)):
        for size in sizes:
            r = await run_size(size, users, args.queries, args.runs)
            print(
                f"{layout:<22}{size:>10,}{r['fill_s']:>8.1f}{r['p50_ms']:>9.2f}{r['p95_ms']:>9.2f}"
                f"{r['scope_precision']:>9.2f}{r['precision']:>7.2f}{r['recall']:>7.2f}"
            )
    footer()


if __name__ == "__main__":
    asyncio.run(main())
