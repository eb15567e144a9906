"""Token estimates: conservative for Chinese, counting every part of a request, and never more
than 10% under a real tokenizer (cl100k / o200k from `bpe-openai`, whose wheel ships them)."""

from __future__ import annotations

import json

import pytest

from agent import tokens
from agent.messages import Message, ThinkingPart, ToolCallPart
from agent.providers.base import ToolSchema
from agent.tokens import estimate_message, estimate_messages, estimate_tokens


def cjk_char_cost(ch: str) -> int:
    """The table's token count for one unified ideograph."""
    return tokens._cost_table()[ord(ch) - tokens._CJK_FIRST]


SAMPLES = [
    "帮我看看贵州茅台(600519)最近的量价结构，是不是在吸筹阶段？我的仓位不超过15%。",
    "上下文压缩摘要本身仍然是有损的，但系统不再把“摘要”当成唯一历史来源。现在采用 摘要继续执行 + 原文归档恢复 的双轨策略：",
    "贵州茅台 宁德时代 泸州老窖 洋河股份 迈瑞医疗 韦尔股份 汇顶科技 紫金矿业 歌尔股份 鹏鼎控股 璞泰来 兆易创新 沪硅产业 赣锋锂业 濮阳惠成 藏格矿业 铜陵有色 鄂尔多斯 昊华科技",
    "Wyckoff 的 Spring 出现在交易区间（TR）的下沿，随后 SOS 放量突破 Creek；LPS 回踩不破即是较好的买点。",
    "| 对话轮次 N | 历史消息总数 | 每轮 miss 条数 | miss 比例 |\n| 2 | 2 | 1 | 50%（短对话损失大） |",
    "• 我们期望在上下文窗口中，预留 25% 的空间不放历史记录。\n• 为了防止小窗口模型的 25% 空间太少，系统规定了安全垫的硬性最低保底值为 16,384。",
    json.dumps(
        {
            "code": "600519",
            "name": "贵州茅台",
            "phase": "吸筹B阶段",
            "bars": [[20250101, 1701.5, 1710.0, 1695.2, 1705.3, 32145]],
        },
        ensure_ascii=False,
    ),
    json.dumps({"code": "300750", "name": "宁德时代", "signals": ["弹簧", "放量突破"]}),  # \\u escapes
    "The quick brown fox jumps over the lazy dog. Backtest: total_return=12.5%, max_drawdown=-8.1%, sharpe=1.42",
    "def summarize_tool_result(name: str, content: str, max_len: int = 600) -> str:\n    return content[:max_len]",
    "QWxhZGRpbjpvcGVuIHNlc2FtZQ== a3f9c2e1b7d4 https://example.com/a/b?x=1&y=abc 😀🚀 Привет мир",
    "止损设在 LPS 下方 3%，若 14:45 后仍站稳 VWAP 且量能温和放大，可以分两笔建仓（各 5%）。",
]


def test_cjk_counts_at_least_one_token_per_character():
    text = "跌破确认支撑不买"
    assert estimate_tokens(text) >= len(text)
    assert estimate_tokens("你") >= 1 and estimate_tokens("") == 0


def test_estimates_count_system_tools_thinking_and_arguments():
    base = estimate_messages([Message.user("hi")])
    assert estimate_messages([Message.user("hi")], system="你是一个投资助手。" * 20) > base + 20
    tool = ToolSchema(
        "analyze_stock", "分析一只股票", {"type": "object", "properties": {"code": {"type": "string"}}}
    )
    assert estimate_messages([Message.user("hi")], tools=[tool]) > base + 10
    thinking = Message.assistant("ok", thinking=[ThinkingPart(text="让我想想这个问题" * 30)])
    assert estimate_message(thinking) > estimate_message(Message.assistant("ok")) + 100
    args = Message.assistant("", [ToolCallPart(id="1", name="f", arguments={"query": "宁德时代 " * 50})])
    assert estimate_message(args) > 200
    result = Message.tool_result("1", "f", "数据" * 300)
    assert estimate_message(result) > 600


def test_never_more_than_ten_percent_under_a_real_tokenizer():
    bpe = pytest.importorskip(
        "bpe_openai",
        reason="bpe-openai (dev extra) ships cl100k/o200k; without it there is no offline tokenizer",
    )
    encodings = [bpe.get_encoding("cl100k_base"), bpe.get_encoding("o200k_base")]
    mixed = "\n".join(SAMPLES)
    for text in [*SAMPLES, mixed]:
        for enc in encodings:
            real = len(enc.encode(text))
            assert estimate_tokens(text) >= 0.9 * real, (text[:40], estimate_tokens(text), real)


def test_embedded_cjk_table_matches_cl100k():
    bpe = pytest.importorskip("bpe_openai", reason="bpe-openai (dev extra) not installed")
    enc = bpe.get_encoding("cl100k_base")
    for cp in range(0x4E00, 0xA000, 7):
        assert cjk_char_cost(chr(cp)) == len(enc.encode(chr(cp)))


# ---- the upper bound compaction decides from when a history is far below its threshold -------
from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from agent.tokens import message_bound, messages_within, token_bound  # noqa: E402

# every class the estimate knows: Latin, digits, punctuation, spaces, newlines, CJK, kana,
# Hangul, full-width forms, emoji and any other character
_ALPHABET = st.one_of(
    st.sampled_from(list("aZ09 .,\n\t-_:/\"'")),
    st.characters(min_codepoint=0x4E00, max_codepoint=0x9FFF),
    st.characters(min_codepoint=0x3000, max_codepoint=0x312F),
    st.characters(min_codepoint=0xAC00, max_codepoint=0xD7AF),
    st.characters(min_codepoint=0xFF00, max_codepoint=0xFFEF),
    st.characters(min_codepoint=0x1F300, max_codepoint=0x1FAFF),
    st.characters(blacklist_categories=("Cs",)),
)


@settings(max_examples=400, deadline=None)
@given(st.text(alphabet=_ALPHABET, max_size=200))
def test_the_length_bound_is_never_under_the_estimate(text):
    assert estimate_tokens(text) <= token_bound(text)


@given(st.text(alphabet=_ALPHABET, max_size=80), st.text(alphabet=_ALPHABET, max_size=80))
def test_the_message_bound_is_never_under_the_estimate(text, other):
    call = ToolCallPart(id="c1", name="quote", arguments={"q": other})
    for message in (
        Message.user(text),
        Message.assistant(text, [call], [ThinkingPart(text=other, signature=text or None)]),
        Message.tool_result("c1", "quote", text),
    ):
        assert estimate_message(message) <= message_bound(message)


@given(st.lists(st.text(alphabet=_ALPHABET, max_size=40), max_size=12), st.integers(0, 2_000))
def test_within_only_when_the_estimate_fits(texts, budget):
    messages = [Message.user(t) for t in texts]
    if messages_within(messages, budget):
        assert estimate_messages(messages) <= budget
    if estimate_messages([]) + sum(message_bound(m) for m in messages) <= budget:
        assert messages_within(messages, budget)


@given(
    st.lists(st.text(alphabet=_ALPHABET, max_size=40), min_size=1, max_size=30),
    st.lists(st.integers(0, 30), max_size=6),
    st.integers(0, 3_000),
)
def test_a_growing_history_is_checked_as_if_summed_afresh(texts, cuts, budget):
    """The running bound of a history that grows (and of one compacted: a new first message)
    answers exactly what summing every message would."""
    history = [Message.user(t) for t in texts]
    plain = lambda ms: estimate_messages([]) + sum(message_bound(m) for m in ms) <= budget  # noqa: E731
    for cut in [*cuts, len(history)]:
        prefix = history[: max(1, min(cut, len(history)))]
        assert messages_within(prefix, budget) == plain(prefix)
    compacted = [Message.user("summary of what came before"), *history[len(history) // 2 :]]
    assert messages_within(compacted, budget) == plain(compacted)
    assert messages_within(history, budget) == plain(history)


def test_the_class_table_is_what_the_rules_say_character_by_character():
    """The table is built from slices for speed; here the plain per-character rules."""
    from agent import tokens

    table = tokens._classes()
    want: dict[int, str] = {}
    for i in range(128):
        ch = chr(i)
        if ch.islower():
            want[i] = "a"
        elif ch.isupper():
            want[i] = "A"
        elif ch.isdigit():
            want[i] = "d"
        elif ch == " ":
            want[i] = "s"
        else:
            want[i] = "p" if 32 < i < 127 else "n"
    for lo, hi, cls in tokens._RANGES:
        for cp in range(lo, hi + 1):
            want[cp] = cls
    for cp in range(tokens._CJK_FIRST, tokens._CJK_LAST + 1):
        want[cp] = "123"[cjk_char_cost(chr(cp)) - 1]
    assert len(table) == max(want) + 1
    assert all(table[cp] == want.get(cp, chr(cp)) for cp in range(len(table)))
    ascii_bytes = tokens._ascii_table()
    assert all(ascii_bytes[i] == ord(table[i]) for i in range(128))
