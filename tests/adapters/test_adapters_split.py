"""Splitting long answers: paragraph/code-fence boundaries, fences reopened, nothing lost."""

from __future__ import annotations

import random
import re

import pytest

from adapters.render import (
    _FenceMap,
    html_visible_text,
    render_parts,
    split_chunks,
    to_discord,
    to_telegram_html,
    utf16_len,
)
from tests.fakes.telegram_api import parse_telegram_html


def long_answer(n: int = 10_000, seed: int = 1) -> str:
    rng = random.Random(seed)
    words = "price volume spring upthrust accumulation markup <tag> & a_b *x* `y` 600519 ETF".split()
    parts: list[str] = []
    while sum(map(len, parts)) < n:
        kind = rng.random()
        if kind < 0.25:
            lines = [
                f"    x{i} = {rng.randint(0, 999)}  # {' '.join(rng.choices(words, k=6))}"
                for i in range(rng.randint(5, 60))
            ]
            parts.append("```python\n" + "\n".join(lines) + "\n```")
        elif kind < 0.35:
            parts.append(
                "\n".join(f"- {' '.join(rng.choices(words, k=8))}" for _ in range(rng.randint(2, 8)))
            )
        else:
            parts.append(" ".join(rng.choices(words, k=rng.randint(10, 90))))
    return "\n\n".join(parts)[:n]


@pytest.mark.parametrize("limit", [4096, 2000, 500])
def test_ten_thousand_chars_with_code_blocks(limit):
    text = long_answer()
    assert len(text) == 10_000 and text.count("```") >= 4
    chunks = split_chunks(text, limit)
    assert len(chunks) >= 10_000 // limit
    assert "".join(c.body for c in chunks) == text  # no character lost or duplicated
    for c in chunks:
        assert len(c.text) <= limit
        assert _FenceMap(c.text).end_state is None  # every chunk's fences are balanced
    # a cut outside code lands on a paragraph boundary (or a line boundary inside code)
    for c in chunks[:-1]:
        assert c.body.endswith("\n") or c.suffix, repr(c.body[-40:])


def test_cut_inside_code_reopens_the_same_fence():
    code = "```sql\n" + "\n".join(f"SELECT {i} FROM t;" for i in range(400)) + "\n```\n\nafter"
    chunks = split_chunks(code, 1000)
    assert len(chunks) > 3
    for c in chunks[1:-1]:
        assert c.prefix == "```sql\n" and c.suffix.endswith("```")
    assert "".join(c.body for c in chunks) == code


def test_prefers_paragraph_boundaries():
    paras = [f"Paragraph {i}. " + "word " * 60 for i in range(30)]
    text = "\n\n".join(paras)
    for c in split_chunks(text, 1500)[:-1]:
        assert c.body.endswith("\n\n")


def test_single_huge_line_is_hard_cut_without_loss():
    text = "x" * 9000
    chunks = split_chunks(text, 4096)
    assert len(chunks) == 3
    assert "".join(c.body for c in chunks) == text
    assert all(len(c.text) <= 4096 for c in chunks)


def test_utf16_length_for_emoji():
    text = "😀" * 3000  # 6000 UTF-16 units
    chunks = split_chunks(text, 4096, length=utf16_len)
    assert all(utf16_len(c.text) <= 4096 for c in chunks)
    assert "".join(c.body for c in chunks) == text


def test_rendered_parts_fit_telegram_and_parse():
    text = long_answer(seed=3)
    parts = render_parts(
        text, limit=4096, fmt="markdown", render=to_telegram_html, visible=html_visible_text, length=utf16_len
    )
    assert len(parts) >= 3
    for p in parts:
        assert utf16_len(parse_telegram_html(p.formatted)) <= 4096
        assert len(p.plain) <= 4096
    # the code survives: every code line of the input appears in some part
    code_lines = [ln for ln in text.splitlines() if ln.startswith("    x")]
    joined = "\n".join(p.plain for p in parts)
    assert all(ln.strip() in joined for ln in code_lines)


def test_discord_parts_stay_under_2000_even_when_mentions_grow():
    text = ("@everyone " * 199 + "\n\n") * 3
    parts = render_parts(text, limit=2000, fmt="markdown", render=to_discord)
    assert all(len(p.formatted) <= 2000 for p in parts)
    assert sum(len(re.findall("everyone", p.formatted)) for p in parts) == 597
