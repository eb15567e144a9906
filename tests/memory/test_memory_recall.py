"""Long-term memory store and hybrid recall: escaping, Chinese search, stock scoping, decay,
pinning, budget, pruning."""

from __future__ import annotations

import pytest
from memory_helpers import resolve_codes

from memory.longterm import MemoryStore
from memory.recall import MAX_TOTAL_CHARS, MemoryRecall
from memory.terms import extract_codes, extract_keywords, fts_or_query, trigram_terms


def test_code_extraction_dedupes_and_ignores_longer_numbers():
    assert extract_codes("看 600519 和 000001，再看600519；1234567 不是") == ["600519", "000001"]


def test_name_resolution_through_the_resolver():
    assert resolve_codes("我想建仓宁德时代") == ["300750"]
    assert resolve_codes("比亚迪 002594") == ["002594"]


def test_keyword_extraction_bigrams_stopwords_limit_and_codes_removed():
    kws = extract_keywords("建仓位置 600519 怎么看")
    assert "仓位" in kws and "位置" in kws
    assert "建仓" not in kws  # generic trade word
    assert all("600519" not in k for k in kws)
    assert len(extract_keywords("追涨 杀跌 尾盘 开盘 均线 量能 支撑 压力")) <= 5
    assert "追涨" in extract_keywords("我不追涨")


@pytest.mark.parametrize(
    "query",
    [
        "帮我看看 600519 的走势?",
        "AND",
        "a-b",
        '"unbalanced',
        "NOT OR NEAR(",
        "(追涨) * ^x",
        "'; DROP TABLE memories; --",
        "",
        "   ",
        "？？？",
    ],
)
async def test_hostile_fts_queries_never_raise(store: MemoryStore, query):
    await store.add("u", "preference", "用户不追涨，偏好尾盘二次确认")
    recall = MemoryRecall(store)
    result = await recall.recall("u", query)
    assert isinstance(result.text, str)
    # And directly through the FTS path with hostile terms.
    await store.search_fts("u", [query, 'x"y', "AND OR"])
    await store.search_terms("u", [query, '"', "*"])


def test_fts_query_quotes_every_term():
    assert fts_or_query(['a"b', "AND"]) == '"a""b" OR "AND"'
    assert fts_or_query(["", " "]) is None


async def test_chinese_recall_finds_unspaced_text(store: MemoryStore):
    target = await store.add("u", "decision", "当天跌破确认支撑不买")
    await store.add("u", "decision", "极端放量冲高回落不买")
    recall = MemoryRecall(store)
    found = await recall.search("u", "今天如果跌破确认支撑还能买吗")
    assert found.ranked and found.ranked[0].record.id == target.id
    assert "fts" in found.ranked[0].sources
    # A 2-character word only the keyword path can match.
    pref = await store.add("u", "decision", "不追涨，等回踩")
    found = await recall.search("u", "追涨")
    assert pref.id in [i.record.id for i in found.ranked]
    assert trigram_terms("追涨") == []  # too short for the trigram index


async def test_stock_scoping_byd_never_recalls_catl(store: MemoryStore):
    catl = await store.add("u", "decision", "宁德时代跌破 220 支撑不建仓")
    byd = await store.add("u", "decision", "比亚迪回踩 20 日线再考虑建仓")
    glob = await store.add("u", "decision", "建仓前先确认大盘不在下跌趋势")
    assert catl.codes == ("300750",) and byd.codes == ("002594",) and glob.codes == ()
    recall = MemoryRecall(store)
    result = await recall.recall("u", "我想建仓比亚迪")
    ids = result.ids
    assert byd.id in ids
    assert catl.id not in ids
    assert "宁德时代" not in result.text
    # A sector word resolves to no stock: no single-stock memory at all.
    sector = await recall.recall("u", "我想建仓科技")
    assert catl.id not in sector.ids and byd.id not in sector.ids


async def test_sector_word_does_not_recall_stock_named_like_it(store: MemoryStore):
    changxin = await store.add("u", "decision", "长信科技放量滞涨时减仓")
    result = await MemoryRecall(store).recall("u", "科技板块能不能买")
    assert changxin.id not in result.ids


async def test_code_match_outranks_keyword_match(store: MemoryStore):
    code_hit = await store.add("u", "decision", "600519 只在周线回踩时加")
    kw_hit = await store.add("u", "decision", "周线级别的回踩更可靠")
    result = await MemoryRecall(store).search("u", "600519 周线")
    assert result.ranked[0].record.id == code_hit.id
    assert result.ranked[0].score == pytest.approx(1.2)
    # A single shared 2-character word is only a fallback: dropped once stronger hits exist...
    assert kw_hit.id not in [i.record.id for i in result.ranked]
    # ...and used when nothing else matches.
    alone = await MemoryRecall(store).search("u", "周线怎么看")
    assert [i.record.id for i in alone.ranked] == [kw_hit.id]
    assert alone.ranked[0].sources == {"keyword"} and alone.ranked[0].score == pytest.approx(0.25)


async def test_decay_by_type_and_preferences_never_decay(store: MemoryStore, clock):
    old = await store.add("u", "decision", "跌破确认支撑不买")
    pref = await store.add("u", "preference", "用户偏好跌破支撑就离场")
    clock.advance(days=28)  # two decision half-lives
    recall = MemoryRecall(store, clock=clock)
    result = await recall.search("u", "跌破确认支撑")
    scores = {i.record.id: i.score for i in result.ranked}
    assert scores[old.id] == pytest.approx(0.8 * 0.25, rel=0.05)
    assert scores[pref.id] > scores[old.id]


async def test_layered_output_sections_source_and_pinned_not_duplicated(store: MemoryStore):
    persona = await store.add("u", "persona", "用户重视本金安全和情绪稳定")
    pref = await store.add("u", "preference", "用户不想开盘买入，避免影响心情", source_ref="chat_log:s1")
    await store.add(
        "u",
        "playbook",
        "尾盘二次确认买入：14:45 后检查支撑、VWAP 和量能；破支撑不买",
        source_ref="chat_log:s1",
    )
    dec = await store.add("u", "decision", "极端放量但冲高回落不买", source_ref="chat_log:s1")
    result = await MemoryRecall(store).recall("u", "尾盘二次确认时放量冲高回落还能买吗，开盘买入呢")
    text = result.text
    assert text.index("# 用户画像") < text.index("# 交易剧本") < text.index("# 历史记忆")
    assert "源:chat_log:s1" in text
    assert text.count("用户不想开盘买入") == 1  # pinned preference not repeated in history
    assert result.pinned[0].id == persona.id and pref.id in [r.id for r in result.pinned]
    assert dec.id in result.ids


async def test_legacy_scenario_recalled_as_playbook(store: MemoryStore):
    await store.add("u", "scenario", "缩量回踩确认：量能萎缩到均量一半以下再考虑")
    result = await MemoryRecall(store).recall("u", "缩量回踩确认怎么做")
    assert "# 交易剧本" in result.text and "[playbook]" in result.text


async def test_budget_and_truncation_marker(store: MemoryStore):
    for i in range(12):
        await store.add("u", "decision", f"规则{i}：" + "跌破确认支撑不买，" * 40)
    result = await MemoryRecall(store).recall("u", "跌破确认支撑")
    assert len(result.text) <= MAX_TOTAL_CHARS + 200  # budget applies to the memory sections
    assert "已截断" in result.text and "/memory trace" in result.text
    for line in result.text.splitlines():
        assert len(line) <= 200


async def test_pinned_limits_and_scope_isolation(store: MemoryStore):
    for i in range(8):
        await store.add("u", "preference", f"偏好规则第{i}条：只做趋势向上的股票")
    await store.add("other", "preference", "另一个用户的偏好：满仓梭哈")
    result = await MemoryRecall(store).recall("u", "今天做什么")
    assert len(result.pinned) == 5
    assert "满仓梭哈" not in result.text


async def test_level_and_since_filters(store: MemoryStore, clock):
    await store.add("u", "preference", "不追涨")
    clock.advance(days=2)
    since = clock.now()
    await store.add("u", "playbook", "尾盘剧本：14:45 后确认")
    assert [r.memory_type for r in await store.recent("u", level="L2")] == ["playbook"]
    assert [r.content for r in await store.recent("u", since=since)] == ["尾盘剧本：14:45 后确认"]


async def test_type_specific_pruning(store: MemoryStore, clock):
    await store.add("u", "decision", "旧决策")
    await store.add("u", "playbook", "旧剧本")
    await store.add("u", "preference", "旧偏好")
    await store.add("u", "persona", "旧画像")
    clock.advance(days=70)
    fresh = await store.add("u", "decision", "新决策")
    report = await store.prune()
    assert report.deleted == {"decision": 1, "playbook": 1}
    left = {r.content for r in await store.recent("u", limit=50)}
    assert left == {"新决策", "旧偏好", "旧画像"}
    assert fresh.id in [r.id for r in await store.recent("u")]
    # The FTS index follows deletes: the pruned rows are not found any more.
    assert await store.search_fts("u", ["旧决策"]) == []


async def test_caps_keep_the_newest(store: MemoryStore, clock):
    for i in range(7):
        clock.advance(seconds=1)
        await store.add("u", "persona", f"画像版本{i}")
    personas = await store.recent("u", types=["persona"], limit=50)
    assert len(personas) == 5 and personas[0].content == "画像版本6"


async def test_exact_duplicate_returns_existing_and_fills_source(store: MemoryStore):
    a = await store.add("u", "preference", "不追涨")
    b = await store.add("u", "preference", "不追涨", source_ref="chat_log:s9")
    assert a.id == b.id and b.source_ref == "chat_log:s9"
    assert await store.count("u") == 1


async def test_update_reindexes_codes_and_text(store: MemoryStore):
    r = await store.add("u", "decision", "贵州茅台不破 1500 不卖")
    assert r.codes == ("600519",)
    updated = await store.update(r.id, "平安银行不破 10 元不卖")
    assert updated is not None and updated.codes == ("000001",)
    assert [h.record.id for h in await store.search_codes("u", ["000001"])] == [r.id]
    assert await store.search_codes("u", ["600519"]) == []
    assert [h.record.id for h in await store.search_fts("u", ["平安银行"])] == [r.id]
