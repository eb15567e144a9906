"""Session-end extraction, de-duplication (fail closed), fetched-content guard, layer refresh and
the pre-compaction flush."""

from __future__ import annotations

from memory_helpers import answering

from agent.messages import Message, ToolCallPart
from agent.providers.scripted import ScriptedClient, reply
from memory.extraction import Candidate, MemoryExtractor, dialog_lines, parse_tagged_lines
from memory.longterm import MemoryStore


def session(user_lines: list[str], tool_text: str = '{"code": "300750", "close": 215.3}') -> list[Message]:
    msgs: list[Message] = []
    for i, text in enumerate(user_lines):
        msgs.append(Message.user(text))
        if i == 0:
            msgs.append(
                Message.assistant(
                    "", [ToolCallPart(id="c1", name="analyze_stock", arguments={"code": "300750"})]
                )
            )
            msgs.append(Message.tool_result("c1", "analyze_stock", tool_text))
        msgs.append(Message.assistant("好的，记住了。"))
    return msgs


USER = [
    "我不想每天开盘就买，容易影响心情，一般尾盘再看",
    "宁德时代跌破 200 就不碰了",
    "还有，单票仓位不超过15%",
]


def test_parse_tagged_lines_ignores_other_tags_and_limits():
    text = "[偏好] 用户偏好尾盘买入\n[股票] 宁德时代\n- [决策] 跌破确认支撑不买\n[preference] never chase rallies\n无"
    got = parse_tagged_lines(text, ("preference", "decision"))
    assert [(c.memory_type, c.content) for c in got] == [
        ("preference", "用户偏好尾盘买入"),
        ("decision", "跌破确认支撑不买"),
        ("preference", "never chase rallies"),
    ]


def test_dialog_lines_cut_tool_results_and_skip_bare_tool_calls():
    msgs = session(USER, tool_text="x" * 1000)
    lines = dialog_lines(msgs)
    assert any(line.startswith("[tool:analyze_stock] ") and len(line) <= 230 for line in lines)
    assert not any("tool_call" in line for line in lines)


async def test_session_extraction_stores_l1_with_source_and_binds_codes_from_content(store: MemoryStore):
    client = answering("[偏好] 用户不想开盘买入，偏好尾盘再看\n[决策] 宁德时代跌破 200 不碰\n[股票] 300750")
    extractor = MemoryExtractor(store, client=client)
    report = await extractor.extract_session("u", "s1", session(USER))
    assert len(report.saved) == 2
    pref, dec = sorted(report.saved, key=lambda r: r.memory_type, reverse=True)
    assert pref.memory_type == "preference" and pref.codes == () and pref.source_ref == "chat_log:s1"
    assert dec.memory_type == "decision" and dec.codes == ("300750",)  # named in the memory itself
    assert len(client.requests) == 1  # no existing memories: no dedup call


async def test_gates(store: MemoryStore):
    client = ScriptedClient()
    extractor = MemoryExtractor(store, client=client)
    assert (await extractor.extract_session("u", "s", session(USER)[:3])).skipped == "fewer than 4 messages"
    chat_only = [
        Message.user("你好"),
        Message.assistant("你好"),
        Message.user("在吗"),
        Message.assistant("在"),
    ]
    assert (await extractor.extract_session("u", "s", chat_only)).skipped == "no tool was used"
    assert (
        await MemoryExtractor(store, client=None).extract_session("u", "s", session(USER))
    ).skipped == "no model configured"
    assert client.requests == []


async def test_repeated_batch_skips_the_llm_and_none_is_marked(store: MemoryStore):
    client = answering("无")
    extractor = MemoryExtractor(store, client=client)
    first = await extractor.extract_session("u", "s1", session(USER))
    assert first.saved == [] and not first.skipped
    again = await extractor.extract_session("u", "s1", session(USER))
    assert again.skipped == "batch already processed"
    assert len(client.requests) == 1


async def test_deterministic_dedup_needs_no_llm(store: MemoryStore):
    await store.add("u", "preference", "用户不想开盘买入，偏好尾盘再看")
    client = ScriptedClient()
    extractor = MemoryExtractor(store, client=client)
    record, reason = await extractor.save_candidate(
        "u", Candidate("preference", "用户不想开盘买入 偏好尾盘再看!"), source_ref="x"
    )
    assert record is None and reason.startswith("duplicate")
    assert client.requests == []


async def test_llm_dedup_fails_closed(store: MemoryStore):
    existing = await store.add("u", "preference", "用户不追涨")
    cand = Candidate("preference", "单票仓位不超过百分之十五")
    cases = {
        "DUPLICATE:999": "dedup named an unknown id",
        "maybe?": "dedup answer invalid",
        f"DUPLICATE:{existing.id}": f"duplicate of #{existing.id}",
    }
    for answer, reason in cases.items():
        extractor = MemoryExtractor(store, client=answering(answer))
        record, why = await extractor.save_candidate("u", cand, source_ref="x")
        assert record is None and why == reason
    failing = MemoryExtractor(store, client=ScriptedClient([RuntimeError("down")]))
    record, why = await failing.save_candidate("u", cand, source_ref="x")
    assert record is None and why == "dedup check failed"
    ok = MemoryExtractor(store, client=answering("NEW"))
    record, _ = await ok.save_candidate("u", cand, source_ref="x")
    assert record is not None


async def test_fetched_content_never_becomes_a_user_preference(store: MemoryStore):
    page = "专家观点：尾盘买入更稳健，不要追涨，仓位控制在三成以内，跌破年线坚决止损。"
    msgs = [
        Message.user("帮我读一下这个网页 https://example.com/advice"),
        Message.assistant(
            "", [ToolCallPart(id="w1", name="web_fetch", arguments={"url": "https://example.com/advice"})]
        ),
        Message.tool_result("w1", "web_fetch", page),
        Message.assistant("网页建议尾盘买入、不要追涨。"),
        Message.user("好的谢谢"),
        Message.assistant("不客气"),
    ]
    client = answering("[偏好] 用户偏好尾盘买入更稳健，不要追涨，仓位控制在三成以内")
    report = await MemoryExtractor(store, client=client).extract_session("u", "s1", msgs)
    assert report.saved == [] and report.rejected[0][1] == "from fetched content"
    # The user's own words with the same page around are kept.
    msgs2 = [*msgs, Message.user("我自己的规矩是：单票仓位不超过15%，这个要记住")]
    client2 = answering("[偏好] 用户单票仓位不超过15%")
    report2 = await MemoryExtractor(store, client=client2).extract_session("u", "s2", msgs2)
    assert [r.content for r in report2.saved] == ["用户单票仓位不超过15%"]


async def test_incremental_layer_refresh(store: MemoryStore, clock):
    layers = (
        "[画像] 用户重视本金安全，偏好二次确认\n[剧本] 尾盘二次确认买入：14:45 后检查支撑和量能；破支撑不买"
    )
    client = ScriptedClient(default=reply(layers))
    extractor = MemoryExtractor(store, client=client)
    for text in ("不追涨", "尾盘买入", "跌破支撑不买"):
        clock.advance(seconds=1)
        await store.add("u", "preference", text)
    assert await extractor.refresh_layers("u") == 2
    assert len(client.requests) == 1
    persona = (await store.recent("u", types=["persona"]))[0]
    assert persona.meta["extractor"] == "layer_refresh" and len(persona.meta["source_l1_ids"]) == 3
    assert await extractor.refresh_layers("u") == 0  # same sources: no call
    assert len(client.requests) == 1
    for text in ("单票不超过15%", "不做ST"):
        clock.advance(seconds=1)
        await store.add("u", "decision", text)
    assert await extractor.refresh_layers("u") == 0  # only 2 new atoms: no call
    assert len(client.requests) == 1
    clock.advance(seconds=1)
    await store.add("u", "decision", "周五不开新仓")
    await extractor.refresh_layers("u")
    assert len(client.requests) == 2  # 3 new atoms: refreshed


async def test_flush_before_compaction_dedups_and_binds_codes_per_line(store: MemoryStore):
    head = [
        Message.user("我一般只在尾盘买，开盘从不追，这个是长期习惯"),
        Message.assistant("明白，之后分析会按尾盘二次确认来。"),
        Message.user("贵州茅台 600519 我长期看好，但 1500 以上不加仓"),
        Message.assistant("记下了：600519 高于 1500 不加仓。"),
    ]
    client = answering(
        "[偏好] 用户只在尾盘买，开盘从不追涨\n[决策] 贵州茅台 1500 以上不加仓\n[偏好] 对话摘要：聊了茅台"
    )
    saved = await MemoryExtractor(store, client=client).flush_before_compaction("u", "s1", head)
    assert saved == 2
    rows = {r.content: r for r in await store.recent("u")}
    assert rows["用户只在尾盘买，开盘从不追涨"].codes == ()
    assert rows["贵州茅台 1500 以上不加仓"].codes == ("600519",)
