"""The model's Markdown parsed by markdown-it-py (CommonMark, plus GFM tables and strikethrough) and
rendered from its token stream: Telegram's HTML subset, plain text, and the block map that
splitting and Discord use.

Raw HTML is never passed through (the parser runs with `html` off, so `<b>` stays text and is
escaped); link targets other than http(s), tg and mailto are shown as text. Telegram does not
allow code inside another entity nor an entity nested in itself: code there degrades to text and
a nested bold/italic collapses into the outer one, so tags always balance.
"""

from __future__ import annotations

import html
import re
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from markdown_it import MarkdownIt
    from markdown_it.token import Token

SAFE_SCHEMES = ("http://", "https://", "tg://", "mailto:")
_LANG = re.compile(r"^[\w+#.-]{1,32}$")
_SPOILER = re.compile(r"\|\|(?=\S)(.+?)(?<=\S)\|\|")
_TASK = re.compile(r"^\[([ xX])\]\s+")


@lru_cache(maxsize=1)
def parser() -> MarkdownIt:
    """Built on first use: most replies take the markup-free shortcut and never parse."""
    from markdown_it import MarkdownIt

    return MarkdownIt("commonmark", {"html": False}).enable(["table", "strikethrough"])


def parse(md: str) -> list[Token]:
    return parser().parse(md)


# ---- block map (for splitting and Discord) -------------------------------------------------------
@dataclass(frozen=True, slots=True)
class Block:
    """A top-level block: its kind (the opening token's type without `_open`) and source lines
    [start, end)."""

    kind: str
    start: int
    end: int
    tag: str = ""  # h1…h6 for a heading


def blocks(md: str, tokens: Sequence[Token] | None = None) -> list[Block]:
    out = []
    for tok in parse(md) if tokens is None else tokens:
        if tok.level == 0 and tok.map is not None and tok.nesting >= 0:
            out.append(Block(tok.type.removesuffix("_open"), tok.map[0], tok.map[1], tok.tag))
    return out


# ---- rendering ------------------------------------------------------------------------------------
class _Out:
    """How one output format spells inline constructs."""

    html = False

    def text(self, s: str) -> str:
        return s

    def open(self, kind: str, href: str = "") -> str:
        return ""

    def close(self, kind: str) -> str:
        return ""

    def code(self, s: str) -> str:
        return s

    def pre(self, code: str, lang: str) -> str:
        return code

    def quote(self, inner: str) -> str:
        return "\n".join("> " + line for line in inner.split("\n"))


class _Html(_Out):
    html = True
    TAGS = {"b": "b", "i": "i", "s": "s", "spoiler": "tg-spoiler"}

    def text(self, s: str) -> str:
        return html.escape(s, quote=False)

    def open(self, kind: str, href: str = "") -> str:
        if kind == "a":
            return f'<a href="{html.escape(href, quote=True)}">'
        return f"<{self.TAGS[kind]}>"

    def close(self, kind: str) -> str:
        return "</a>" if kind == "a" else f"</{self.TAGS[kind]}>"

    def code(self, s: str) -> str:
        return f"<code>{html.escape(s, quote=False)}</code>"

    def pre(self, code: str, lang: str) -> str:
        body = html.escape(code, quote=False)
        if lang and _LANG.match(lang):
            return f'<pre><code class="language-{html.escape(lang)}">{body}</code></pre>'
        return f"<pre>{body}</pre>"

    def quote(self, inner: str) -> str:
        return f"<blockquote>{inner}</blockquote>"


_INLINE_KIND = {"strong": "b", "em": "i", "s": "s"}


def _inline(children: Sequence[Token], out: _Out, outer: frozenset[str] = frozenset()) -> str:
    parts: list[str] = []
    stack: list[tuple[str, bool]] = []  # (kind, emitted)
    open_kinds = set(outer)
    link_tail: list[str] = []  # " (url)" for a link shown as text

    def wrapped(kind: str) -> bool:
        return kind in open_kinds

    for tok in children:
        t = tok.type
        if t == "text":
            parts.append(_text_with_spoilers(tok.content, out, open_kinds))
        elif t == "code_inline":
            parts.append(out.text(tok.content) if open_kinds else out.code(tok.content))
        elif t in ("softbreak", "hardbreak"):
            parts.append("\n")
        elif t.endswith("_open") and t.removesuffix("_open") in _INLINE_KIND:
            kind = _INLINE_KIND[t.removesuffix("_open")]
            emit = not wrapped(kind)
            stack.append((kind, emit))
            if emit:
                open_kinds.add(kind)
                parts.append(out.open(kind))
        elif t.endswith("_close") and t.removesuffix("_close") in _INLINE_KIND and stack:
            kind, emitted = stack.pop()
            if emitted:
                open_kinds.discard(kind)
                parts.append(out.close(kind))
        elif t == "link_open":
            href = str(tok.attrs.get("href", ""))
            label_is_url = tok.markup == "autolink"
            if href.lower().startswith(SAFE_SCHEMES) and "a" not in open_kinds and out.html:
                stack.append(("a", True))
                open_kinds.add("a")
                parts.append(out.open("a", href))
                link_tail.append("")
            else:
                stack.append(("a", False))
                link_tail.append("" if label_is_url else f" ({href})")
        elif t == "link_close" and stack:
            kind, emitted = stack.pop()
            if emitted:
                open_kinds.discard("a")
                parts.append(out.close("a"))
            tail = link_tail.pop() if link_tail else ""
            if tail:
                parts.append(out.text(tail))
        elif t == "image":
            src = str(tok.attrs.get("src", ""))
            parts.append(out.text(f"{tok.content} ({src})" if tok.content else src))
        else:  # html_inline (raw HTML is off, kept for safety) and anything unknown: as text
            parts.append(out.text(tok.content))
    while stack:  # the parser balances these; never leave a tag open whatever it yields
        kind, emitted = stack.pop()
        if emitted:
            parts.append(out.close(kind))
    return "".join(parts)


def _text_with_spoilers(s: str, out: _Out, open_kinds: set[str]) -> str:
    if "||" not in s or not out.html or "spoiler" in open_kinds:
        return out.text(s)
    pieces, pos = [], 0
    for m in _SPOILER.finditer(s):
        pieces.append(out.text(s[pos : m.start()]))
        pieces.append(out.open("spoiler") + out.text(m.group(1)) + out.close("spoiler"))
        pos = m.end()
    pieces.append(out.text(s[pos:]))
    return "".join(pieces)


class _Renderer:
    def __init__(self, md: str, out: _Out):
        self.lines = md.split("\n")
        self.out = out
        self.tokens = parse(md)
        self.i = 0

    def render(self) -> str:
        return self._blocks(stop_level=-1, indent="").strip("\n")

    def _blocks(self, stop_level: int, indent: str, list_kind: str = "", tight: bool = False) -> str:
        """Render blocks until the closing token at `stop_level`; blocks are joined as in the
        source: a blank line between them when the source had one."""
        chunks: list[str] = []
        last_end: int | None = None
        number = 0
        while self.i < len(self.tokens):
            tok = self.tokens[self.i]
            if tok.nesting == -1 and tok.level == stop_level:
                self.i += 1
                break
            start = tok.map[0] if tok.map else None
            sep = "\n"
            if chunks and last_end is not None and start is not None and start > last_end and not tight:
                sep = "\n\n"
            text: str | None
            if tok.type == "list_item_open":
                number = int(tok.info) if tok.info.isdigit() else number + 1
                mark = f"{number}{tok.markup}" if list_kind == "ordered" else "•"
                text = self._item(tok, mark, indent, tight)
            else:
                text = self._block(tok, indent)
            if text is None:
                continue
            if chunks:
                chunks.append(sep)
            chunks.append(text)
            if tok.map:
                last_end = tok.map[1]
        return "".join(chunks)

    def _item(self, tok: Token, mark: str, indent: str, tight: bool) -> str:
        level = tok.level
        self.i += 1
        body = self._blocks(level, indent + "  ", tight=tight)
        task = _TASK.match(body)
        if task and mark == "•":
            mark = "☑" if task.group(1) in "xX" else "☐"
            body = body[task.end() :]
        return f"{indent}{mark} {body}"

    def _block(self, tok: Token, indent: str) -> str | None:
        out, t = self.out, tok.type
        self.i += 1
        if t == "paragraph_open":
            inline = self.tokens[self.i]
            self.i += 2  # inline, paragraph_close
            return _inline(inline.children or [], out)
        if t == "heading_open":
            inline = self.tokens[self.i]
            self.i += 2
            return out.open("b") + _inline(inline.children or [], out, frozenset({"b"})) + out.close("b")
        if t in ("fence", "code_block"):
            lang = tok.info.strip().split()[0] if tok.info.strip() else ""
            return out.pre(tok.content.removesuffix("\n"), lang)
        if t == "hr":
            return "———"
        if t in ("bullet_list_open", "ordered_list_open"):
            kind = "ordered" if t == "ordered_list_open" else "bullet"
            tight = self._tight(tok)
            return self._blocks(tok.level, indent, kind, tight)
        if t == "blockquote_open":
            return out.quote(self._blocks(tok.level, ""))
        if t == "table_open":
            source = "\n".join(self.lines[tok.map[0] : tok.map[1]]) if tok.map else ""
            self._skip(tok.level)
            return out.pre(source, "")
        if t == "html_block":
            return out.text(tok.content.removesuffix("\n"))
        if tok.nesting == 1:  # an unknown container: its blocks
            return self._blocks(tok.level, indent)
        return None

    def _skip(self, level: int) -> None:
        while self.i < len(self.tokens):
            tok = self.tokens[self.i]
            self.i += 1
            if tok.nesting == -1 and tok.level == level:
                return

    def _tight(self, tok: Token) -> bool:
        j = self.i
        while j < len(self.tokens) and self.tokens[j].type != "paragraph_open":
            j += 1
        return j < len(self.tokens) and self.tokens[j].hidden


def telegram_html(md: str) -> str:
    return _Renderer(md, _Html()).render()


def plain(md: str) -> str:
    return _Renderer(md, _Out()).render()
