"""Markdown → Telegram HTML / Discord / plain: escaping and validity (checked with the fake's
Telegram-like HTML parser)."""

from __future__ import annotations

import random

import pytest

from adapters.render import to_discord, to_plain, to_telegram_html
from tests.fakes.telegram_api import ParseError, parse_telegram_html

# every character MarkdownV2 or HTML treats specially, plus HTML-looking text and entities
BREAKING = r"""_ * [ ] ( ) ~ ` > # + - = | { } . ! \ < > & &amp; &lt; &#x1F600; <b>not bold</b> <script>x</script> a<b c>d 1 < 2 && 3 > 2 "q" 'q' </i>"""


def test_breaking_characters_render_to_valid_html_and_survive():
    out = to_telegram_html(BREAKING)
    visible = parse_telegram_html(out)  # raises like Telegram would if invalid
    for token in ["<b>not bold</b>", "<script>x</script>", "1 < 2 && 3 > 2", "</i>", "{ }", "|"]:
        assert token in visible
    assert "& & < 😀" in visible  # entities are CommonMark's: &amp; is shown as &


def test_inline_constructs():
    html = to_telegram_html("**bold** *it* _it_ ~~gone~~ `x<y` [site](https://e.com/?a=1&b=2) snake_case_var")
    assert "<b>bold</b>" in html
    assert html.count("<i>it</i>") == 2
    assert "<s>gone</s>" in html
    assert "<code>x&lt;y</code>" in html
    assert '<a href="https://e.com/?a=1&amp;b=2">site</a>' in html
    assert "snake_case_var" in html
    parse_telegram_html(html)


def test_blocks_code_lists_headings_quotes_tables():
    md = "# Title\n\n- one\n* two\n1. first\n- [x] done\n\n> quoted **b**\n\n```python\nif a < b:\n    print('&')\n```\n\n| a | b |\n|---|---|\n| 1 | 2 |"
    html = to_telegram_html(md)
    parse_telegram_html(html)
    assert html.startswith("<b>Title</b>")
    assert "• one" in html and "• two" in html and "1. first" in html and "☑ done" in html
    assert "<blockquote>quoted <b>b</b></blockquote>" in html
    assert "<pre><code class=\"language-python\">if a &lt; b:\n    print('&amp;')</code></pre>" in html
    assert "<pre>| a | b |" in html


def test_unsafe_link_schemes_are_not_links():
    html = to_telegram_html("[click](javascript:alert(1)) [x](data:text/html,hi)")
    assert "<a " not in html
    parse_telegram_html(html)


def test_code_inside_bold_degrades_and_nested_same_tags_collapse():
    html = to_telegram_html("**bold `code` here** and # not heading\n## **Heading** bold")
    parse_telegram_html(html)
    assert "<b><b>" not in html
    assert "<b>bold code here</b>" in html


def test_unclosed_markup_and_fences_are_literal_or_closed():
    for md in ["**unclosed", "`open code", "```python\nno close", "[label](", "*a **b* c**", "__x", "||sp"]:
        parse_telegram_html(to_telegram_html(md))


def test_random_markdown_always_parses():
    rng = random.Random(7)
    pieces = ["**", "*", "_", "__", "~~", "||", "`", "```", "```py\n", "\n", "\n\n", "# ", "- ", "> ", "[a](https://x.y)",
              "[b](", "<", ">", "&", "&amp;", "<b>", "</b>", "word", " ", "\\", "|a|b|\n|-|-|\n", "@everyone", "😀"]  # fmt: skip
    for _ in range(600):
        md = "".join(rng.choice(pieces) for _ in range(rng.randint(1, 40)))
        html = to_telegram_html(md)
        try:
            parse_telegram_html(html)
        except ParseError as e:  # pragma: no cover - diagnostic
            pytest.fail(f"{md!r} -> {html!r}: {e}")


def test_discord_passthrough_defuses_mass_mentions_and_tables():
    md = "Hey @everyone and @here, **bold** `@everyone`\n```\n@here in code\n```\n| a | b |\n|---|---|\n| 1 | 2 |\n#### small"
    out = to_discord(md)
    assert "@everyone" not in out.replace("`@everyone`", "").replace("\u200b", "|")
    assert "@\u200beveryone and @\u200bhere" in out
    assert "**bold**" in out
    assert "```\n@here in code\n```" in out  # code untouched
    assert "```\n| a | b |" in out
    assert "**small**" in out


def test_plain_strips_markup_but_keeps_content():
    md = "# T\n**b** [l](https://x.io) `c`\n```\ncode <x>\n```"
    assert to_plain(md) == "T\nb l (https://x.io) c\ncode <x>"


# ---- markup-free text takes a shortcut: it must render exactly as the parser renders it -------
from hypothesis import example, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from adapters.render import _markup_free, _to_plain, _to_telegram_html  # noqa: E402

# prose, digits and spacing, every markup and HTML character, and line starts that make blocks
_PIECES = st.sampled_from(
    ["a", "Z", "1", "42", " ", "  ", "\n", "\t", "\r", ".", ")", "(", ",", "!", "?", ":", "'", '"',
     "=", "@", "{", "}", "é", "中", "😀", "*", "_", "~", "|", "[", "]", "<", ">", "&", "#", "+",
     "-", "`", "\\", "1. ", "2) ", "# ", "> ", "- ", "---", "```", "http://x.y"]
)  # fmt: skip


@settings(max_examples=500, deadline=None)
@given(st.lists(_PIECES, max_size=30).map("".join))
@example("echo u1 m1")
@example("\n\n hello \n")
@example(" 3. three")
def test_the_markup_free_shortcut_renders_like_the_parser(text):
    if _markup_free(text):
        assert to_telegram_html(text) == _to_telegram_html(text)
        assert to_plain(text) == _to_plain(text)
