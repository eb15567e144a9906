"""Markdown from the model → each platform's safe format, and message splitting.

- `to_telegram_html`: a small allow-listed HTML subset (b, i, s, code, pre, a, blockquote,
  tg-spoiler); everything else is escaped, so the output always parses (HTML is far more robust than
  MarkdownV2 for model output). Tags are produced only for matched pairs, so they always balance.
- `to_discord`: Discord renders Markdown itself; we pass it through, neutralise mass mentions
  (@everyone/@here) and turn tables (which Discord does not render) into code blocks.
- `to_plain`: the readable text without markup; what we resend when a platform rejects formatting.
- `split_chunks` / `split_message`: cut at paragraph, then line, then word boundaries, closing an
  open code fence at the end of a chunk and reopening it at the start of the next. Concatenating the
  chunks' `body` reproduces the input exactly.
"""

from __future__ import annotations

import bisect
import html
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

# ---------------------------------------------------------------------------------------------
# Lengths


def utf16_len(text: str) -> int:
    """Telegram counts message length in UTF-16 code units (astral emoji count twice); a lone
    surrogate counts once."""
    return len(text.encode("utf-16-le", "surrogatepass")) // 2


_TAG_RE = re.compile(r"<[^>]*>")


def html_visible_text(rendered: str) -> str:
    """What Telegram counts toward the 4096 limit: the text after entity parsing."""
    return html.unescape(_TAG_RE.sub("", rendered))


# ---------------------------------------------------------------------------------------------
# Code fences

_FENCE_OPEN = re.compile(r"^ {0,3}(`{3,}|~{3,})([^`\n]*)$")


@dataclass(frozen=True, slots=True)
class _Fence:
    marker: str  # e.g. "```" or "~~~~"
    opener: str  # the opening line as written, e.g. "```python"


def _is_close(line: str, fence: _Fence) -> bool:
    s = line.strip()
    return (
        len(line) - len(line.lstrip(" ")) <= 3 and len(s) >= len(fence.marker) and set(s) == {fence.marker[0]}
    )


class _FenceMap:
    """For every line of a text: where it starts and which fence (if any) is open before it."""

    def __init__(self, text: str):
        self.starts: list[int] = []
        self.before: list[_Fence | None] = []
        self.kinds: list[str] = []  # "open", "close", "blank", "text"
        self.longest_marker = 3
        fence: _Fence | None = None
        pos = 0
        for line in text.splitlines(keepends=True):
            bare = line.rstrip("\r\n")
            self.starts.append(pos)
            self.before.append(fence)
            if fence is None:
                m = _FENCE_OPEN.match(bare)
                if m and not (m.group(1)[0] == "`" and "`" in m.group(2)):
                    fence = _Fence(m.group(1), bare.strip())
                    self.longest_marker = max(self.longest_marker, len(m.group(1)))
                    self.kinds.append("open")
                else:
                    self.kinds.append("blank" if not bare.strip() else "text")
            elif _is_close(bare, fence):
                fence = None
                self.kinds.append("close")
            else:
                self.kinds.append("text")
            pos += len(line)
        self.end_state = fence

    def line_index(self, pos: int) -> int:
        return max(0, bisect.bisect_right(self.starts, pos) - 1)

    def fence_at(self, pos: int, text_len: int) -> _Fence | None:
        """The fence open at position `pos` (a cut point: everything before `pos` is in one chunk)."""
        if not self.starts:
            return None
        if pos >= text_len:
            return self.end_state
        return self.before[self.line_index(pos)]


# ---------------------------------------------------------------------------------------------
# Splitting


@dataclass(frozen=True, slots=True)
class Chunk:
    prefix: str  # a reopened fence ("```python\n") or ""
    body: str  # an exact slice of the input
    suffix: str  # a closing fence ("\n```") or ""

    @property
    def text(self) -> str:
        return self.prefix + self.body + self.suffix


def _fit(text: str, start: int, budget: int, length: Callable[[str], int]) -> int:
    """The largest end such that length(text[start:end]) <= budget (at least start + 1)."""
    if length is len:
        return min(len(text), start + max(1, budget))
    end, used = start, 0
    while end < len(text):
        w = length(text[end])
        if used + w > budget:
            break
        used += w
        end += 1
    return max(end, start + 1)


def _choose_cut(text: str, fm: _FenceMap, start: int, end: int) -> int:
    """Best cut in (start, end]: paragraph/fence boundary, then line, then space, then hard."""
    if end >= len(text):
        return len(text)
    floor = start + max(1, (end - start) // 3)
    first = bisect.bisect_right(fm.starts, floor)
    last = bisect.bisect_right(fm.starts, end) - 1
    para = line = None
    for i in range(last, first - 1, -1):
        if i <= 0 or i >= len(fm.starts):
            continue
        cut = fm.starts[i]
        if cut <= floor or cut > end:
            continue
        if line is None:
            line = cut
        outside = fm.before[i] is None
        prev = fm.kinds[i - 1]
        if outside and (prev in ("blank", "close") or fm.kinds[i] == "open"):
            para = cut
            break
    if para is not None:
        return para
    if line is not None:
        return line
    spaces = [m.end() for m in re.finditer(r"\s+", text[floor:end])]
    if spaces:
        return floor + spaces[-1]
    cut = end
    # don't cut a surrogate-free but combining sequence in half: step back over combining marks
    while cut - 1 > start and _is_joiner(text[cut]):
        cut -= 1
    return cut


def _is_joiner(ch: str) -> bool:
    return ch in "\u200d\ufe0f" or 0x0300 <= ord(ch) <= 0x036F or 0x1F3FB <= ord(ch) <= 0x1F3FF


def split_chunks(text: str, limit: int, *, length: Callable[[str], int] = len) -> list[Chunk]:
    """Split Markdown into chunks whose `.text` is at most `limit` long (by `length`).

    `"".join(c.body for c in chunks) == text` always holds; an open code fence is closed at the
    end of a chunk and reopened (same opener line) at the start of the next.
    """
    if limit < 16:
        raise ValueError("limit too small")
    if length(text) <= limit:
        return [Chunk("", text, "")]
    fm = _FenceMap(text)
    reserve = 1 + fm.longest_marker  # "\n```"
    chunks: list[Chunk] = []
    pos = 0
    while pos < len(text):
        fence = fm.fence_at(pos, len(text))
        prefix = fence.opener + "\n" if fence else ""
        if len(prefix) > limit // 2:  # absurd opener line: don't reopen
            prefix = ""
        rest = text[pos:]
        tail_fence = fm.end_state
        tail = ("\n" + tail_fence.marker) if (tail_fence and prefix) else ""
        if length(prefix) + length(rest) + length(tail) <= limit:
            chunks.append(Chunk(prefix, rest, ""))
            break
        budget = limit - length(prefix) - reserve
        end = _fit(text, pos, budget, length)
        cut = _choose_cut(text, fm, pos, end)
        body = text[pos:cut]
        open_at_cut = fm.fence_at(cut, len(text))
        suffix = ""
        if open_at_cut is not None:
            suffix = ("" if body.endswith("\n") else "\n") + open_at_cut.marker
        chunks.append(Chunk(prefix, body, suffix))
        pos = cut
    return chunks


def split_message(text: str, limit: int, *, length: Callable[[str], int] = len) -> list[str]:
    return [c.text for c in split_chunks(text, limit, length=length)]


# ---------------------------------------------------------------------------------------------
# Inline Markdown


class _Target:
    """How one output format spells each inline construct. Subclasses override."""

    def text(self, s: str) -> str:
        return s

    def code(self, s: str) -> str:
        return s

    def wrap(self, kind: str, inner: str) -> str:  # kind: b, i, s, spoiler
        return inner

    def link(self, label: str, url: str) -> str:
        return label if label == url else f"{label} ({url})"


class _HtmlTarget(_Target):
    TAGS = {"b": ("<b>", "</b>"), "i": ("<i>", "</i>"), "s": ("<s>", "</s>"),
            "spoiler": ("<tg-spoiler>", "</tg-spoiler>")}  # fmt: skip

    def text(self, s: str) -> str:
        return html.escape(s, quote=False)

    def code(self, s: str) -> str:
        return f"<code>{html.escape(s, quote=False)}</code>"

    def wrap(self, kind: str, inner: str) -> str:
        a, b = self.TAGS[kind]
        return f"{a}{inner}{b}"

    def link(self, label: str, url: str) -> str:
        return f'<a href="{html.escape(url, quote=True)}">{label}</a>'


_SAFE_SCHEMES = ("http://", "https://", "tg://", "mailto:")
_LINK_RE = re.compile(
    r"\[((?:[^\[\]\n]|\[[^\[\]\n]*\])*)\]\(\s*<?([^\s()<>]+(?:\([^\s()]*\))?[^\s()<>]*)>?(?:\s+\"[^\"]*\")?\s*\)"
)
_AUTOLINK_RE = re.compile(r"<((?:https?|tg)://[^\s<>]+|mailto:[^\s<>]+)>")
_PUNCT = set("\\`*_{}[]()#+-.!|~<>\"'=:;,?@$%^&/")
_DELIMS = (("**", "b"), ("__", "b"), ("~~", "s"), ("||", "spoiler"))
# Only these characters can start markup; runs of anything else are copied in one step.
_ORDINARY = re.compile(r"[^\\`\[<*_~|]+")


def _find_close(s: str, delim: str, start: int) -> int:
    """Index of a closing `delim` at or after `start` that is not preceded by whitespace."""
    j = s.find(delim, start)
    while j != -1:
        if j > start and not s[j - 1].isspace():
            return j
        j = s.find(delim, j + 1)
    return -1


def _render_inline(s: str, t: _Target, ctx: frozenset[str] = frozenset()) -> str:
    out: list[str] = []
    buf: list[str] = []

    def flush() -> None:
        if buf:
            out.append(t.text("".join(buf)))
            buf.clear()

    i, n = 0, len(s)
    while i < n:
        ordinary = _ORDINARY.match(s, i)
        if ordinary is not None:
            buf.append(ordinary.group())
            i = ordinary.end()
            if i == n:
                break
        c = s[i]
        if c == "\\" and i + 1 < n and s[i + 1] in _PUNCT:
            buf.append(s[i + 1])
            i += 2
            continue
        if c == "`":
            run = len(s[i:]) - len(s[i:].lstrip("`"))
            ticks = "`" * run
            j = s.find(ticks, i + run)
            while j != -1 and j + run < n and s[j + run] == "`":
                j = s.find(ticks, j + run + 1)
            if j != -1:
                flush()
                content = s[i + run : j]
                if len(content) > 2 and content[0] == " " and content[-1] == " ":
                    content = content[1:-1]
                # Telegram: code may not sit inside other entities; degrade to plain text there
                out.append(t.code(content) if not ctx else t.text(content))
                i = j + run
                continue
            buf.append(ticks)
            i += run
            continue
        if c == "[" and "a" not in ctx:
            m = _LINK_RE.match(s, i)
            if m:
                label, url = m.group(1), m.group(2)
                flush()
                if url.lower().startswith(_SAFE_SCHEMES):
                    out.append(t.link(_render_inline(label, t, ctx | {"a"}), url))
                else:
                    out.append(t.text(f"{label} ({url})"))
                i = m.end()
                continue
        if c == "<" and "a" not in ctx:
            m = _AUTOLINK_RE.match(s, i)
            if m:
                flush()
                out.append(t.link(t.text(m.group(1)), m.group(1)))
                i = m.end()
                continue
        matched = False
        for delim, kind in _DELIMS:
            if s.startswith(delim, i) and i + 2 < n and not s[i + 2].isspace():
                if delim == "__" and i > 0 and s[i - 1].isalnum():
                    break
                j = _find_close(s, delim, i + 2)
                if j != -1:
                    flush()
                    inner = _render_inline(s[i + 2 : j], t, ctx | {kind})
                    out.append(inner if kind in ctx else t.wrap(kind, inner))
                    i = j + 2
                    matched = True
                break
        if matched:
            continue
        if c in "*_" and i + 1 < n and not s[i + 1].isspace() and s[i + 1] != c:
            left_ok = c == "*" or i == 0 or not s[i - 1].isalnum()
            j = _find_close(s, c, i + 1) if left_ok else -1
            while j != -1 and (
                (j + 1 < n and s[j + 1] == c) or (c == "_" and j + 1 < n and s[j + 1].isalnum())
            ):
                j = _find_close(s, c, j + 2)
            if j != -1:
                flush()
                inner = _render_inline(s[i + 1 : j], t, ctx | {"i"})
                out.append(inner if "i" in ctx else t.wrap("i", inner))
                i = j + 1
                continue
        buf.append(c)
        i += 1
    flush()
    return "".join(out)


# ---------------------------------------------------------------------------------------------
# Blocks

_HEADING = re.compile(r"^ {0,3}(#{1,6})\s+(.*?)\s*#*\s*$")
_BULLET = re.compile(r"^(\s*)[-*+]\s+(?:\[([ xX])\]\s+)?(.*)$")
_ORDERED = re.compile(r"^(\s*)(\d{1,9}[.)])\s+(.*)$")
_QUOTE = re.compile(r"^ {0,3}>\s?(.*)$")
_HR = re.compile(r"^ {0,3}([-*_])(?:\s*\1){2,}\s*$")
_TABLE_SEP = re.compile(r"^\s*\|?\s*:?-{2,}:?\s*(\|\s*:?-{2,}:?\s*)*\|?\s*$")
_LANG = re.compile(r"^[\w+#.-]{1,32}$")


def _is_table_row(line: str) -> bool:
    return line.lstrip().startswith("|") and line.count("|") >= 2


# (kind, payload): code → (lang, text), table → lines, quote → lines, line → text. The payload's
# shape follows the kind; the two renderers below branch on the kind and read it accordingly.
_Block = tuple[str, Any]


def _blocks(md: str) -> Iterator[_Block]:
    """Yield (kind, payload) blocks: code(lang, text), table(lines), quote(lines), line(text)."""
    lines = md.replace("\r\n", "\n").split("\n")
    i = 0
    while i < len(lines):
        line = lines[i]
        m = _FENCE_OPEN.match(line)
        if m and not (m.group(1)[0] == "`" and "`" in m.group(2)):
            fence = _Fence(m.group(1), line.strip())
            lang = m.group(2).strip().split()[0] if m.group(2).strip() else ""
            body: list[str] = []
            i += 1
            while i < len(lines) and not _is_close(lines[i], fence):
                body.append(lines[i])
                i += 1
            i += 1  # skip the closing line (or run past the end of an unclosed fence)
            yield "code", (lang, "\n".join(body))
            continue
        if _is_table_row(line) and i + 1 < len(lines) and _TABLE_SEP.match(lines[i + 1]):
            rows = [line]
            i += 1
            while i < len(lines) and (_is_table_row(lines[i]) or _TABLE_SEP.match(lines[i])):
                rows.append(lines[i])
                i += 1
            yield "table", rows
            continue
        if _QUOTE.match(line):
            quoted = []
            while i < len(lines) and (m2 := _QUOTE.match(lines[i])):
                quoted.append(m2.group(1))
                i += 1
            yield "quote", quoted
            continue
        yield "line", line
        i += 1


def _render_line(line: str, t: _Target) -> str:
    if _HR.match(line):
        return "———"
    m = _HEADING.match(line)
    if m:
        inner = _render_inline(m.group(2), t, frozenset({"b"}))
        return t.wrap("b", inner)
    m = _BULLET.match(line)
    if m:
        indent, box, rest = m.groups()
        mark = "•" if box is None else ("☑" if box in "xX" else "☐")
        return f"{indent}{mark} {_render_inline(rest, t)}"
    m = _ORDERED.match(line)
    if m:
        indent, num, rest = m.groups()
        return f"{indent}{num} {_render_inline(rest, t)}"
    return _render_inline(line, t)


# Text without any character that starts markup (inline, or a line's heading, bullet, quote, rule,
# table or fence), without HTML's special characters and without a numbered line renders as
# itself: most short answers. Checked in two C-speed scans instead of parsed line by line.
_MARKUP_FREE = re.compile(r"[^\\`*_~|\[\]<>&#+\-\r]*")
_NUMBERED = re.compile(r"^\s*\d{1,9}[.)]", re.MULTILINE)


def _markup_free(md: str) -> bool:
    return _MARKUP_FREE.fullmatch(md) is not None and _NUMBERED.search(md) is None


def to_telegram_html(md: str) -> str:
    if _markup_free(md):
        return md.strip("\n")
    return _to_telegram_html(md)


def _to_telegram_html(md: str) -> str:
    t = _HtmlTarget()
    out: list[str] = []
    for kind, payload in _blocks(md):
        if kind == "code":
            lang, code = payload
            body = html.escape(code, quote=False)
            if lang and _LANG.match(lang):
                out.append(f'<pre><code class="language-{html.escape(lang)}">{body}</code></pre>')
            else:
                out.append(f"<pre>{body}</pre>")
        elif kind == "table":
            out.append("<pre>" + html.escape("\n".join(payload), quote=False) + "</pre>")
        elif kind == "quote":
            out.append("<blockquote>" + "\n".join(_render_line(x, t) for x in payload) + "</blockquote>")
        else:
            out.append(_render_line(payload, t))
    return "\n".join(out).strip("\n")


def to_plain(md: str) -> str:
    if _markup_free(md):
        return md.strip("\n")
    return _to_plain(md)


def _to_plain(md: str) -> str:
    t = _Target()
    out: list[str] = []
    for kind, payload in _blocks(md):
        if kind == "code":
            out.append(payload[1])
        elif kind == "table":
            out.extend(payload)
        elif kind == "quote":
            out.extend("> " + _render_line(x, t) for x in payload)
        else:
            out.append(_render_line(payload, t))
    return "\n".join(out).strip("\n")


_MASS_MENTION = re.compile(r"@(everyone|here)\b", re.IGNORECASE)
_DISCORD_HEADING = re.compile(r"^ {0,3}#{4,6}\s+(.*?)\s*#*\s*$")


def _neutralise_mentions(s: str) -> str:
    return _MASS_MENTION.sub("@\u200b\\1", s)


def to_discord(md: str) -> str:
    """Discord renders Markdown; keep code untouched, defuse mass mentions, tables → code blocks."""
    out: list[str] = []
    lines = md.replace("\r\n", "\n").split("\n")
    fence: _Fence | None = None
    i = 0
    while i < len(lines):
        line = lines[i]
        if fence is not None:
            out.append(line)
            if _is_close(line, fence):
                fence = None
            i += 1
            continue
        m = _FENCE_OPEN.match(line)
        if m and not (m.group(1)[0] == "`" and "`" in m.group(2)):
            fence = _Fence(m.group(1), line.strip())
            out.append(line)
            i += 1
            continue
        if _is_table_row(line) and i + 1 < len(lines) and _TABLE_SEP.match(lines[i + 1]):
            rows = []
            while i < len(lines) and (_is_table_row(lines[i]) or _TABLE_SEP.match(lines[i])):
                rows.append(lines[i].replace("```", "'''"))
                i += 1
            out.extend(["```", *rows, "```"])
            continue
        m = _DISCORD_HEADING.match(line)
        if m:
            line = f"**{m.group(1)}**"
        # inline code spans are left alone by Discord, but mentions inside them never ping either
        out.append(_neutralise_mentions(line))
        i += 1
    return "\n".join(out)


# ---------------------------------------------------------------------------------------------
# Render + split in one step (what adapters use)


@dataclass(frozen=True, slots=True)
class RenderedPart:
    formatted: str | None  # None when the format is plain
    plain: str


def render_parts(
    text: str,
    *,
    limit: int,
    fmt: str,
    render: Callable[[str], str],
    visible: Callable[[str], str] = lambda s: s,
    length: Callable[[str], int] = len,
) -> list[RenderedPart]:
    """Split `text` so every part, rendered, stays within `limit` (measured on `visible(rendered)`
    and on the plain fallback), then render each part. Empty parts are dropped."""
    parts: list[RenderedPart] = []
    pending = [c.text for c in split_chunks(text, limit, length=length)]
    while pending:
        src = pending.pop(0)
        formatted = render(src) if fmt == "markdown" else None
        plain = to_plain(src) if fmt == "markdown" else src
        over = max(length(visible(formatted)) if formatted is not None else 0, length(plain)) - limit
        if over > 0 and length(src) > 32:
            smaller = max(16, min(limit, length(src)) - over - 16)
            again = [c.text for c in split_chunks(src, smaller, length=length)]
            if len(again) > 1:
                pending[0:0] = again
                continue
        if not plain.strip() and not (formatted or "").strip():
            continue
        parts.append(RenderedPart(formatted, plain))
    return parts
