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
import itertools
import re
from collections.abc import Callable
from dataclasses import dataclass

from adapters import markdown

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
        self.no_cut = _heading_bodies(text)

    def line_index(self, pos: int) -> int:
        return max(0, bisect.bisect_right(self.starts, pos) - 1)

    def fence_at(self, pos: int, text_len: int) -> _Fence | None:
        """The fence open at position `pos` (a cut point: everything before `pos` is in one chunk)."""
        if not self.starts:
            return None
        if pos >= text_len:
            return self.end_state
        return self.before[self.line_index(pos)]


def _heading_bodies(text: str) -> frozenset[int]:
    """Lines a chunk may not start at: from just after a heading through the first line of the
    block below it, so a heading is never the last thing in a chunk (markdown-it's block map)."""
    found: set[int] = set()
    top = markdown.blocks(text)
    for block, after in itertools.pairwise(top):
        if block.kind == "heading":
            found.update(range(block.end, after.start + 1))
    return frozenset(found)


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
        if cut <= floor or cut > end or i in fm.no_cut:
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
# Rendering (adapters/markdown.py parses; these are the adapters' entry points)

# Text without any character that starts markup (inline, or a line's heading, bullet, quote, rule,
# setext underline, table or fence), without HTML's special characters, without a numbered line,
# and without the spacing a parser normalises (leading or trailing blanks on a line, tabs, runs of
# blank lines) renders as itself: most short answers. Checked in C-speed scans, not parsed.
_MARKUP_FREE = re.compile(r"[^\\`*_~|\[\]<>&#+\-=\r\t]*")
_NUMBERED = re.compile(r"^\s*\d{1,9}[.)]", re.MULTILINE)
_RESHAPED = re.compile(r"^[ ]|[ ]$|\n[ ]*\n[ ]*\n", re.MULTILINE)


def _markup_free(md: str) -> bool:
    return (
        _MARKUP_FREE.fullmatch(md) is not None
        and _NUMBERED.search(md) is None
        and _RESHAPED.search(md.strip("\n")) is None
    )


def to_telegram_html(md: str) -> str:
    if _markup_free(md):
        return md.strip("\n")
    return _to_telegram_html(md)


def _to_telegram_html(md: str) -> str:
    return markdown.telegram_html(md.replace("\r\n", "\n"))


def to_plain(md: str) -> str:
    if _markup_free(md):
        return md.strip("\n")
    return _to_plain(md)


def _to_plain(md: str) -> str:
    return markdown.plain(md.replace("\r\n", "\n"))


_MASS_MENTION = re.compile(r"@(everyone|here)\b", re.IGNORECASE)


def _neutralise_mentions(s: str) -> str:
    return _MASS_MENTION.sub("@\u200b\\1", s)


def to_discord(md: str) -> str:
    """Discord renders Markdown itself: the source is kept, block by block (markdown-it's map),
    except that tables (which Discord does not render) become code blocks, headings below ### (which
    it does not have) bold lines, and mass mentions outside code are defused."""
    lines = md.replace("\r\n", "\n").split("\n")
    out: list[str] = []
    pos = 0
    for block in markdown.blocks("\n".join(lines)):
        out.extend(_neutralise_mentions(line) for line in lines[pos : block.start])
        source = lines[block.start : block.end]
        if block.kind in ("fence", "code_block"):
            out.extend(source)
        elif block.kind == "table":
            rows = [line.replace("```", "'''") for line in source if line.strip()]
            out.extend(["```", *rows, "```"])
            out.extend(line for line in source[len(rows) :] if not line.strip())
        elif block.kind == "heading" and block.tag in ("h4", "h5", "h6"):
            heading = _DISCORD_HEADING.match(source[0])
            out.append(f"**{heading.group(1)}**" if heading else _neutralise_mentions(source[0]))
            out.extend(_neutralise_mentions(line) for line in source[1:])
        else:
            out.extend(_neutralise_mentions(line) for line in source)
        pos = max(pos, block.end)
    out.extend(_neutralise_mentions(line) for line in lines[pos:])
    return "\n".join(out)


_DISCORD_HEADING = re.compile(r"^ {0,3}#{4,6}\s+(.*?)\s*#*\s*$")


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
