"""The compaction shortcuts give exactly what the plain versions gave: a collapsed prefix
for snippets, a capped message view for scoring, a cheap pre-test before PATH_RE, orjson first."""

from __future__ import annotations

import json

from hypothesis import given, settings
from hypothesis import strategies as st

from agent import compaction as c
from agent.messages import Message, TextPart, ToolCallPart, ToolResultPart

TOKENS = [*"ab/._- \u3000\n\t茅0123456789", "py", "json", ".md", "~/", "notes.txt"]
TEXT = st.lists(st.sampled_from(TOKENS), max_size=200).map("".join)


def _plain_snippet(text: str, limit: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


@settings(max_examples=500)
@given(TEXT, st.integers(min_value=1, max_value=80))
def test_snippet_equals_collapsing_the_whole_text(text, limit):
    assert c._snippet(text, limit) == _plain_snippet(text, limit)


@settings(max_examples=500)
@given(TEXT)
def test_the_path_pre_test_never_hides_a_path(text):
    if c.PATH_RE.search(text):
        assert "/" in text or c._BARE_FILE_EXT_RE.search(text)


@settings(max_examples=200)
@given(st.lists(TEXT, min_size=1, max_size=4), st.integers(min_value=1, max_value=300))
def test_a_capped_message_view_is_a_prefix_of_the_whole(contents, limit):
    msg = Message(
        role="tool",
        parts=tuple(ToolResultPart(call_id=f"c{i}", name="t", content=x) for i, x in enumerate(contents)),
    )
    whole = c.message_text(msg)
    capped = c.message_text(msg, limit)
    assert whole.startswith(capped) and capped[:limit] == whole[:limit]


def test_tool_results_orjson_refuses_still_parse():
    assert c._parse_json('{"price": NaN, "code": "600519"}')["code"] == "600519"
    assert c._parse_json("not json") is None
    assert c._parse_json(json.dumps({"a": [1, 2]})) == {"a": [1, 2]}


def test_scoring_and_anchors_read_only_the_start_of_huge_results():
    big = json.dumps({"code": "600519", "rows": [{"close": i} for i in range(20_000)]})
    msgs = [
        Message(role="user", parts=(TextPart(text="看看 600519，不要追高"),)),
        Message(
            role="assistant",
            parts=(ToolCallPart(id="c1", name="analyze_stock", arguments={"code": "600519"}),),
        ),
        Message(role="tool", parts=(ToolResultPart(call_id="c1", name="analyze_stock", content=big),)),
    ]
    anchors = c.select_anchor_messages(msgs)
    assert [a.index for a in anchors] == [0, 1, 2]
    assert all(len(a.text) <= c.ANCHOR_CHARS for a in anchors)
