"""Rendering from markdown-it-py's token stream: emphasis as CommonMark reads it, any input is valid
Telegram HTML with balanced tags, and long answers split at block boundaries with every heading
kept with its body, fences balanced and every part within the platform's limit."""

from __future__ import annotations

import re

from hypothesis import given, settings
from hypothesis import strategies as st

from adapters.render import (
    html_visible_text,
    render_parts,
    split_chunks,
    to_discord,
    to_plain,
    to_telegram_html,
    utf16_len,
)
from tests.fakes.telegram_api import parse_telegram_html

_TAG = re.compile(r"<(/?)([a-z-]+)[^>]*>")


def _balanced(rendered: str) -> bool:
    stack: list[str] = []
    for m in _TAG.finditer(rendered):
        closing, name = m.group(1), m.group(2)
        if not closing:
            stack.append(name)
        elif not stack or stack.pop() != name:
            return False
    return not stack


def test_bold_italic_and_nesting_follow_commonmark():
    assert to_telegram_html("***bold italic***") == "<i><b>bold italic</b></i>"
    assert to_plain("***bold italic***") == "bold italic"
    assert to_telegram_html("**a *b* c**") == "<b>a <i>b</i> c</b>"
    assert to_telegram_html("*a **b** c*") == "<i>a <b>b</b> c</i>"
    assert to_telegram_html("2*3*4 and a_b_c") == "2<i>3</i>4 and a_b_c"


_PIECES = st.sampled_from(
    ["**", "*", "***", "_", "__", "~~", "||", "`", "```", "```py\n", "\n", "\n\n", "# ", "## ", "- ",
     "1. ", "> ", "[a](https://x.y)", "[b](", "](", "<", ">", "&", "&amp;", "<b>", "</b>", "word", " ",
     "\\", "|a|b|\n|-|-|\n", "@everyone", "😀", "中文", "    ", "---\n", "===\n", "<https://x.y>"]
)  # fmt: skip


@settings(max_examples=400, deadline=None)
@given(st.lists(_PIECES, max_size=40).map("".join))
def test_any_input_is_valid_telegram_html_with_balanced_tags(md):
    rendered = to_telegram_html(md)
    parse_telegram_html(rendered)  # raises as Telegram would
    assert _balanced(rendered), rendered


def _section(i: int) -> str:
    body = " ".join(f"point{i}-{k} about price and volume" for k in range(40))
    return f"## Heading {i}\n\n{body}\n\n```\ncode {i}\n```"


def _heading_kept_with_body(parts: list[str]) -> None:
    for part in parts:
        last = [line for line in part.rstrip("\n").split("\n") if line.strip()][-1]
        assert not re.match(r"^(#+ |<b>Heading|\*\*Heading)", last), part[-200:]


def test_long_answers_split_at_blocks_keeping_each_heading_with_its_body():
    text = "\n\n".join(_section(i) for i in range(40))
    for limit in (2000, 4096, 700):
        chunks = split_chunks(text, limit)
        assert "".join(c.body for c in chunks) == text
        _heading_kept_with_body([c.text for c in chunks])
        for c in chunks:
            assert len(c.text) <= limit and c.text.count("```") % 2 == 0
    discord = render_parts(text, limit=2000, fmt="markdown", render=to_discord)
    assert len(discord) > 3
    _heading_kept_with_body([p.formatted or "" for p in discord])
    telegram = render_parts(
        text, limit=4096, fmt="markdown", render=to_telegram_html, visible=html_visible_text, length=utf16_len
    )
    _heading_kept_with_body([p.formatted or "" for p in telegram])


@settings(max_examples=150, deadline=None)
@given(st.lists(_PIECES, max_size=400).map("".join), st.sampled_from([200, 700, 2000]))
def test_any_input_splits_within_the_limit_and_each_part_renders(md, limit):
    parts = render_parts(
        md, limit=limit, fmt="markdown", render=to_telegram_html, visible=html_visible_text, length=utf16_len
    )
    for p in parts:
        assert p.formatted is not None
        assert utf16_len(parse_telegram_html(p.formatted)) <= limit
        assert utf16_len(p.plain) <= limit
        assert _balanced(p.formatted)
