"""Conservative token estimates (no tokenizer download at run time).

Compaction decides from these numbers whether a request still fits the model's window, so they
must not under-count: a plain `len/2` rule measured 0.79× the real count on Chinese and a
history it estimated at 228K tokens was rejected by the gateway at 275K. Here:

- CJK ideographs cost what they cost in cl100k (1, 2 or 3 tokens each: the per-character table
  below is derived from cl100k's byte-pair ranks; cl100k is the most CJK-expensive of the common
  vocabularies, and merges across characters only make the real count smaller);
- CJK punctuation, full-width forms and kana count 2, Hangul and CJK extension characters 3,
  a space before a digit or CJK character 1;
- Latin words count (len+2)/4 per camelCase piece, digit runs (len+2)/3 (BPEs split
  numbers into groups of at most 3 digits), ASCII punctuation runs (len+1)/2;
- tabs and newlines count 1 each, runs of spaces 1 + len/16 (single spaces merge into words);
- any other character counts 1, characters outside the BMP (emoji) 3.

`tests/memory/test_memory_tokens.py` checks the estimate is never more than 10% under cl100k or
o200k on mixed Chinese/English samples and that the table matches cl100k (when `bpe-openai`, which
ships the vocabularies inside its wheel, is installed).
"""

from __future__ import annotations

import base64
import json
import re
import weakref
import zlib
from collections.abc import Callable, Iterable, Sequence
from functools import lru_cache
from typing import Any

from agent.messages import Message, TextPart, ThinkingPart, ToolCallPart, ToolResultPart
from agent.providers.base import ToolSchema

# Per-message framing (role markers, separators) and per-tool-call/-result wrappers: a few tokens
# each in every vendor's chat format; rounded up.
MESSAGE_OVERHEAD = 4
TOOL_CALL_OVERHEAD = 12
TOOL_RESULT_OVERHEAD = 8
TOOL_SCHEMA_OVERHEAD = 12
REQUEST_OVERHEAD = 8

_CJK_FIRST, _CJK_LAST = 0x4E00, 0x9FFF
# zlib+base85 of bytes(cost(cp) for cp in U+4E00..U+9FFF) in cl100k_base.
_CJK_COST_BLOB = (
    "c-rNgi<0Xg2!`il-~XM@oL;s`L<54FbThL%ZPF+p{M;0ITnPOCdwzc3lJ}?A|Lx<~kLB}i_kH)O`l$HX?-0kAUNi3}+!OP9{"
    "GoXJprqn4)bl<yiZD^Gu=zVK=kHVbyc2u(RS@8y#?EzUxF5qM?>{-*eB6t0V4J^5Td9buAo%={Qk5w!Dzfgj)uS<4X&Y?$Bt"
    "?HL+6x^+BSA$5r_CRc3m<j#aI!&}4Sb^D-wtCnEZqp37CyJ=p-Fgc*sU$mV}DFC7n=f2CqseC$(L<P(nc!qw~4w~A<($6B)a"
    "Fr`tcLypMfB`_hk_y8BU{fM2f{!0w==!i>5-JWtaB)lYk#NMmZEolE;$1v894PsK{apCzN-nU=+T%{?v}y={XJqq9<xeH1Vj"
    "4$UrssIA`fpOk0fFOf#7T=31#h4?}HQmf{J}42hs+;WHQ|$MGasT98A^LUQId<7#8IBU<@C$x7kiac_&0ylCQRx-R<TVl_ne"
    "no7h+kO>2$BF;`m95JVtji{QfNwX{Ti{C{0C}2|(@yQ))0q893!&u3x->uepe3m%0GB?d4p}h(e5Mf$+PMQEsfiuu<q7_q;X"
    "pQ=>#QIB$|Mbr<OY&p8fWJHck6DJvpW`nEbkjt50=!%Y1Vo(IaEE26r0f(fb&Qv&%w8x!2>OpDIKAkKE^T-JpRS@>@w|^}zB"
    "d2wuj%zwR#po@CeJ9k{7I8@uoDo)KMBZ85`~)-|Dk@UWOY5kPO^f@h4J4~LmV7HP}X2*+7=VzhjD91T}OnO>(7+<%hksXDH;"
    "nouM~_hqfqIQ{oaK^h8iDG-xt<d33DgKvHnM^^Tu`TrxX9l<RprU-7AzVe;Mq`mAwcuJBIGpAFK@vWPe<N>DUwk3Fg}`+WCk"
    "-Qo}(cHx{0s|E~_W<J!U6=`UD6^k~4<=)YV3KeD#7AakGCt;_0v#zk<~db`YGLmK(N<gGueV3+Cmn^u`Q*<)#}-qPJ#WVTl("
    "_uViiB=7$pTb)0uOC`zSkR7o<mv}guj9k<<FOwy_cW_`Ur1jRSRz$xyYC1691rMuV=#4g_1t+CF^*Qo^Wm_pU-3BC_roIB0S"
    "k52EYbh)9f1YdZ6wy6n>csy4<osQ(CV=Egy!pS+Y{_@+9etpI-Me8tZ;vYwgH1f`s_`8Zkx1WieDI4EKW63s4A}n_5(~Ay?S"
    "!~^wIhqhIjfyOru;Jld<Hr>X}tEA_Ws`d`ik@acklm4r-_DWtK;U?{_7u|MZrq"
)


@lru_cache(maxsize=1)
def _cost_table() -> bytes:
    return zlib.decompress(base64.b85decode("".join(_CJK_COST_BLOB)))


@lru_cache(maxsize=1)
def _classes() -> str:
    """A `str.translate` table mapping each character to its class letter, so one C-speed pass
    plus a few `count`s and run regexes replace a Python loop over characters:
    a/A lower/upper Latin, d digit, p ASCII punctuation, s space, n newline/tab/control,
    1/2/3 a character costing that many tokens. Characters not in the table stay themselves.
    Kept as one string indexed by code point (beyond its end, `translate` leaves a character as
    it is): 128 KB, where a dict of the same ~40,000 entries held 2.6 MB for the life of the
    process."""
    # Built from slices at C speed (a loop over the ~40,000 entries took ~4x longer): ASCII, then
    # for each block (`_RANGES` and the CJK ideographs, which do not overlap) the code points
    # before it as themselves and the block's letters.
    costs = _cost_table()
    blocks = sorted([*_RANGES, (_CJK_FIRST, _CJK_FIRST + len(costs) - 1, "")])
    parts, at = [_ascii_classes()], 128
    for lo, hi, cls in blocks:
        parts.append("".join(map(chr, range(at, lo))))
        parts.append(cls * (hi - lo + 1) if cls else costs.translate(_COST_LETTERS).decode("ascii"))
        at = hi + 1
    return "".join(parts)


_COST_LETTERS = bytes.maketrans(b"\x01\x02\x03", b"123")


def _ascii_classes() -> str:
    """The class letters of the 128 ASCII characters (the start of `_classes()`)."""
    out = []
    for i in range(128):
        ch = chr(i)
        if ch.islower():
            out.append("a")
        elif ch.isupper():
            out.append("A")
        elif ch.isdigit():
            out.append("d")
        elif ch == " ":
            out.append("s")
        else:
            out.append("p" if 32 < i < 127 else "n")
    return "".join(out)


# CJK punctuation, full-width forms, kana, bopomofo, general punctuation: 2; Hangul syllables and
# jamo, CJK extension A and compatibility ideographs: 3 (most are 3 UTF-8 bytes without a merge).
_RANGES = (
    (0x2000, 0x206F, "2"),
    (0x3000, 0x312F, "2"),
    (0x31F0, 0x31FF, "2"),
    (0xFE30, 0xFE4F, "2"),
    (0xFF00, 0xFFEF, "2"),
    (0x1100, 0x11FF, "3"),
    (0x3400, 0x4DBF, "3"),
    (0xAC00, 0xD7AF, "3"),
    (0xF900, 0xFAFF, "3"),
)
_WORDS = re.compile("[aA]+")
_DIGITS = re.compile("d+")
_PUNCT = re.compile("p+")
_SPACES = re.compile("s{2,}")


@lru_cache(maxsize=1)
def _ascii_table() -> bytes:
    """The ASCII part of `_classes()` as a `bytes.translate` table (a much faster pass). Built on
    its own: an all-ASCII process (a one-shot turn in English) never builds the full table."""
    classes = _ascii_classes()
    return bytes(ord(classes[i]) if i < 128 else ord("n") for i in range(256))


_WORDS_B = re.compile(b"[aA]+")
_DIGITS_B = re.compile(b"d+")
_PUNCT_B = re.compile(b"p+")
_SPACES_B = re.compile(b"s{2,}")


@lru_cache(maxsize=65536)
def estimate_tokens(text: str) -> int:
    """A conservative token count for `text` (rules in the module docstring). Cached: the same
    stored strings are re-estimated every round."""
    if not text:
        return 0
    if text.isascii():  # tool results are mostly ASCII JSON: classify bytes, same rules
        return _estimate_classes(text.encode("ascii").translate(_ascii_table()), ascii_only=True, text=text)
    return _estimate_classes(text.translate(_classes()), ascii_only=False, text=text)


def _estimate_classes(tr: Any, *, ascii_only: bool, text: str) -> int:
    """Apply the rules to a class string (`str`) or class bytes (ASCII fast path)."""
    words_re: re.Pattern[Any]
    digits_re: re.Pattern[Any]
    punct_re: re.Pattern[Any]
    spaces_re: re.Pattern[Any]
    if ascii_only:
        words_re, digits_re, punct_re, spaces_re = _WORDS_B, _DIGITS_B, _PUNCT_B, _SPACES_B

        def count(sub: str) -> int:
            return int(tr.count(sub.encode()))
    else:
        words_re, digits_re, punct_re, spaces_re = _WORDS, _DIGITS, _PUNCT, _SPACES
        count = tr.count
    lower, upper, digits, punct = count("a"), count("A"), count("d"), count("p")
    letters = lower + upper
    total = 0.0
    if letters:  # a word piece of L letters: (L+2)/4; camelCase humps start new pieces
        total += (letters + 2 * (len(words_re.findall(tr)) + count("aA"))) / 4
    if digits:  # digit runs of L: (L+2)/3 (BPEs group at most 3 digits)
        total += (digits + 2 * len(digits_re.findall(tr))) / 3
    if punct:
        total += (punct + len(punct_re.findall(tr))) / 2
    newlines = count("n")
    # A space before a digit or a CJK character is a token of its own in the common BPEs.
    total += newlines + count("sd") + count("s1") + count("s2") + count("s3")
    spaces = spaces_re.findall(tr)
    if spaces:  # indentation merges into few tokens
        total += len(spaces) + sum(map(len, spaces)) / 16
    if not ascii_only:
        one, two, three = count("1"), count("2"), count("3")
        astral = len(text.encode("utf-16-le")) // 2 - len(text)
        other = len(text) - letters - digits - punct - count("s") - newlines - one - two - three - astral
        total += one + 2 * two + 3 * three + 3 * astral + other
    return int(-(-total // 1))


# Messages are immutable and a session's history is re-estimated every turn: remember each
# message's count.
class _ByIdentity:
    """Counts of messages by identity, checked through a weak reference (a recycled id never
    hits); emptied when full."""

    def __init__(self, limit: int = 20_000):
        self._counts: dict[int, tuple[weakref.ref[Message], int]] = {}
        self._limit = limit

    def get(self, message: Message) -> int | None:
        hit = self._counts.get(id(message))
        return hit[1] if hit is not None and hit[0]() is message else None

    def put(self, message: Message, count: int) -> int:
        if len(self._counts) >= self._limit:
            self._counts.clear()
        self._counts[id(message)] = (weakref.ref(message), count)
        return count


_ESTIMATES = _ByIdentity()
_BOUNDS = _ByIdentity()


def estimate_message(message: Message) -> int:
    """Tokens of one message: text, thinking, tool calls (name + arguments) and tool results."""
    known = _ESTIMATES.get(message)
    return known if known is not None else _ESTIMATES.put(message, _estimate_message(message))


def _message_total(message: Message, count: Callable[[str], int]) -> int:
    """A message's tokens with `count` for each text: the estimate, or its upper bound."""
    total = MESSAGE_OVERHEAD
    for part in message.parts:
        if isinstance(part, TextPart):
            total += count(part.text)
        elif isinstance(part, ThinkingPart):
            # Reasoning echoed back (Anthropic signed thinking, DeepSeek reasoning_content) counts too.
            total += count(part.text) + (count(part.signature) if part.signature else 0)
        elif isinstance(part, ToolCallPart):
            total += TOOL_CALL_OVERHEAD + count(part.name) + count(part.arguments_text)
        elif isinstance(part, ToolResultPart):
            total += TOOL_RESULT_OVERHEAD + count(part.content)
    return total


def _estimate_message(message: Message) -> int:
    return _message_total(message, estimate_tokens)


# Most turns are far below the compaction threshold: there a cheap upper bound of the history's
# count answers "does it fit?" and new messages need no estimate at all (an estimate of a short
# text is ~10 µs of regex passes, two a turn at least). No character costs more than
# `MAX_CHAR_TOKENS` under the rules above (CJK and astral characters 3, every other class at most
# 1, a space before a digit or CJK character 1 more), and rounding up adds less than one per text.
MAX_CHAR_TOKENS = 3


def token_bound(text: str) -> int:
    """An upper bound of `estimate_tokens(text)` from its length alone."""
    return MAX_CHAR_TOKENS * len(text) + 1 if text else 0


def _message_bound(message: Message) -> int:
    return _message_total(message, token_bound)


def message_bound(message: Message) -> int:
    """An upper bound of `estimate_message(message)`: the estimate itself when it is known."""
    known = _ESTIMATES.get(message)
    if known is None:
        known = _BOUNDS.get(message)
    return known if known is not None else _BOUNDS.put(message, _message_bound(message))


class _HistoryBounds:
    """The running upper bound of each history seen lately, so that the check of a session that
    grew by a few messages adds only those: a history is append-only between compactions, and
    one that starts with another first message (compacted, or another session) starts over.
    Keyed by the first message's identity, checked through weak references."""

    def __init__(self, limit: int = 4096):
        self._limit = limit
        self._by_first: dict[int, tuple[weakref.ref[Message], weakref.ref[Message], int, int]] = {}

    def prefix(self, messages: Sequence[Message]) -> tuple[int, int]:
        """(how many leading messages are already summed, their bound)."""
        if not messages:
            return 0, 0
        hit = self._by_first.get(id(messages[0]))
        if hit is None:
            return 0, 0
        first, last, count, total = hit
        if first() is not messages[0] or count > len(messages) or last() is not messages[count - 1]:
            return 0, 0
        return count, total

    def remember(self, messages: Sequence[Message], count: int, total: int) -> None:
        if count == 0:
            return
        if len(self._by_first) >= self._limit:
            self._by_first.clear()
        self._by_first[id(messages[0])] = (
            weakref.ref(messages[0]),
            weakref.ref(messages[count - 1]),
            count,
            total,
        )


_HISTORIES = _HistoryBounds()


def messages_within(messages: Sequence[Message], budget: int) -> bool:
    """True when `estimate_messages(messages)` is surely at most `budget`, told from upper
    bounds (False means only: count them)."""
    start, summed = _HISTORIES.prefix(messages)
    total = REQUEST_OVERHEAD + summed
    for m in messages[start:]:
        if total > budget:
            return False
        total += message_bound(m)
    _HISTORIES.remember(messages, len(messages), total - REQUEST_OVERHEAD)
    return total <= budget


def estimate_tools(tools: Iterable[ToolSchema]) -> int:
    """Tokens of the tool schemas sent with every request."""
    total = 0
    for tool in tools:
        schema = json.dumps(tool.parameters, ensure_ascii=False, sort_keys=True)
        total += (
            TOOL_SCHEMA_OVERHEAD
            + estimate_tokens(tool.name)
            + estimate_tokens(tool.description)
            + estimate_tokens(schema)
        )
    return total


def estimate_messages(messages: Sequence[Message], system: str = "", tools: Iterable[ToolSchema] = ()) -> int:
    """Tokens of a whole request: system prompt, tool schemas and every message."""
    total = REQUEST_OVERHEAD + estimate_tokens(system) + estimate_tools(tools)
    return total + sum(estimate_message(m) for m in messages)
