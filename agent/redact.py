"""Secret redaction for traces, logs and tool output.

Redaction is hygiene, not a security boundary (a motivated output producer can defeat it): the
real controls are the allowlisted child environment and never handing secrets to the model. It
still keeps the common leaks — an API key in a trace, a bot token in an httpx log line, a password
pasted into chat — out of files on disk.

Three layers, applied together:
- values under sensitive *key names* (api_key, token, authorization, cookie, ...) → "***";
- any occurrence of a configured *secret value* (the keys and tokens tapebot loaded) → "***",
  also disguised: with zero-width or other format characters inside, letter-spaced or split by
  punctuation and line breaks, in full-width or other compatibility forms (NFKC), reversed, or
  encoded in base64 (standard or URL-safe, at any alignment inside a longer encoded text),
  base32 or hex. These are found in a view of the text that keeps only ASCII letters and digits
  after NFKC, so one cheap pass answers for every disguise, and masked where they stand;
- well-known token *shapes* (sk-…, Telegram bot tokens, Bearer …, Discord, AWS, GitHub, JWT).
"""

from __future__ import annotations

import base64
import logging
import re
import unicodedata
import urllib.parse
from collections import OrderedDict
from collections.abc import Callable, Iterable
from typing import Any

from agent.messages import Message, TextPart, ThinkingPart, ToolCallPart, ToolResultPart

MASK = "***"
MIN_SECRET_LEN = 6

# Exact key names (normalised: lower case, '-' → '_') whose values are always masked.
SENSITIVE_KEYS = frozenset(
    {
        "api_key",
        "apikey",
        "x_api_key",
        "token",
        "access_token",
        "refresh_token",
        "id_token",
        "auth_token",
        "bot_token",
        "session_token",
        "authorization",
        "proxy_authorization",
        "password",
        "passwd",
        "secret",
        "client_secret",
        "secret_key",
        "private_key",
        "cookie",
        "set_cookie",
        "webhook_secret",
    }
)
# Suffixes that make any key sensitive (telegram_bot_token, openai_api_key, db_password, ...).
# Note "_token" but not "_tokens": usage counters (input_tokens, max_tokens) must stay readable.
_SENSITIVE_SUFFIXES = ("_api_key", "_apikey", "_token", "_secret", "_password", "_passwd", "_private_key")


_KEY_VERDICTS: dict[str, bool] = {}  # keys repeat endlessly (traces, tool arguments): remember them


def is_sensitive_key(key: str) -> bool:
    verdict = _KEY_VERDICTS.get(key)
    if verdict is None:
        k = key.strip().lower().replace("-", "_")
        verdict = k in SENSITIVE_KEYS or k.endswith(_SENSITIVE_SUFFIXES)
        if len(_KEY_VERDICTS) >= 4096:  # arbitrary user keys must not grow it without bound
            _KEY_VERDICTS.clear()
        _KEY_VERDICTS[key] = verdict
    return verdict


# Token shapes. They start where no ASCII word character precedes them — not at `\b`, which
# does not fire between a CJK character and a letter ("密钥是sk-…"). None contains whitespace,
# all are made of [A-Za-z0-9_-.:] and all are ≥ 15 characters, so they are only looked for
# inside long whitespace-free words: one C-speed split instead of a regex scan per shape over the
# whole text (tool results and traces are long; this runs in the hot loop).
_SHAPE_MIN_WORD = 15
_SHAPES: list[re.Pattern[str]] = [
    # Anthropic / OpenAI style keys (sk-ant-…, sk-proj-…, sk-…)
    re.compile(r"(?<![A-Za-z0-9_\-])sk-(?:ant-|proj-)?[A-Za-z0-9_\-]{16,}"),
    # Telegram bot tokens, also inside api.telegram.org/bot<token>/ URLs (no \b before the digits)
    re.compile(r"(?<![0-9])[0-9]{6,}:[A-Za-z0-9_\-]{30,}"),
    # JWTs (before the Discord shape, which they would otherwise partly match)
    re.compile(r"(?<![A-Za-z0-9_\-])eyJ[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{8,}"),
    # Discord bot tokens: base64(user id).timestamp.hmac
    re.compile(r"(?<![A-Za-z0-9_\-])[A-Za-z0-9_\-]{23,28}\.[A-Za-z0-9_\-]{6,7}\.[A-Za-z0-9_\-]{27,}"),
    # AWS access key ids
    re.compile(r"(?<![A-Za-z0-9])(?:AKIA|ASIA)[0-9A-Z]{16}(?![A-Za-z0-9])"),
    # GitHub, Slack, Google API keys
    re.compile(r"(?<![A-Za-z0-9_])(?:gh[pousr]_[A-Za-z0-9]{30,}|github_pat_[A-Za-z0-9_]{30,})"),
    re.compile(r"(?<![A-Za-z0-9_])xox[abposr]-[A-Za-z0-9\-]{10,}"),
    re.compile(r"(?<![A-Za-z0-9_\-])AIza[0-9A-Za-z_\-]{35}"),
]
# Every shape is made of these characters, so shapes are only looked for inside long runs of them
# (one fast character-class scan; prose, CJK text and short words are skipped at C speed).
_TOKEN_RUN = re.compile(rf"[A-Za-z0-9_\-.:]{{{_SHAPE_MIN_WORD},}}")
# Any shape at all, in one scan: most long words (ids, timestamps, URLs) match none.
_ANY_SHAPE = re.compile("|".join(f"(?:{p.pattern})" for p in _SHAPES))

# Contextual patterns: a sensitive name followed by its value ("Authorization: Bearer x",
# "api_key=x", '"password": "x"', "?token=x"). Names are found case-sensitively in the lower-cased
# text (a case-insensitive regex scan is ~4x slower), then the value is matched right after them.
_KV_NAME = re.compile(
    r"(?:authorization|api[_\-]?key|access[_\-]?token|auth[_\-]?token|bot[_\-]?token|refresh[_\-]?token|"
    r"secret|password|passwd|[?&;]token)"
)
_KV_NAME_ANY_CASE = re.compile(_KV_NAME.pattern, re.IGNORECASE)
_KV_HINTS = re.compile("authorization|key|token|secret|passw")  # cheap pre-check for _KV_NAME
_KV_VALUE = re.compile(
    r"[\"']?\s*[=:]\s*[\"']?(?:(?:bearer|basic|bot|token)\s+)?(?!\*\*\*)([^\s\"'&,;]+)", re.IGNORECASE
)
# "Bearer <token>" on its own; the token must be long so prose ("bearer bonds") survives.
_BEARER = re.compile(r"(\b[Bb]earer\s+)(?!\*\*\*)[A-Za-z0-9._~+/=\-]{20,}")


def _mask_named_values(s: str, lower: str) -> str:
    names = _KV_NAME.finditer(lower) if len(lower) == len(s) else _KV_NAME_ANY_CASE.finditer(s)
    out: list[str] = []
    last = 0
    for name in names:
        m = _KV_VALUE.match(s, name.end())
        if m is None or m.start(1) < last:
            continue
        out.append(s[last : m.start(1)])
        out.append(MASK)
        last = m.end(1)
    if not out:
        return s
    out.append(s[last:])
    return "".join(out)


def _sub_pattern(m: re.Match[str]) -> str:
    keep = m.groupdict().get("keep")
    return (keep or "") + MASK


# The texts redacted last, by identity: a turn masks the same text object again on its way to
# the history, the trace and the chat (a 2 KB answer is a ~0.1 ms scan each time). Bounded: at
# most MEMO_ENTRIES texts of at most MEMO_MAX_CHARS each.
MEMO_ENTRIES = 256
MEMO_MAX_CHARS = 16_000


# Disguised forms are matched on letters and digits only: a needle shorter than this could
# turn up in ordinary text once the spaces and punctuation are gone.
NEEDLE_MIN = 10
# A stream holds back a tail whose letters and digits begin a disguised secret from this many on.
DISGUISE_HOLD_MIN = 3
_NOT_ALNUM = bytes(b for b in range(256) if not chr(b).isascii() or not chr(b).isalnum())


def alnum_view(text: str) -> str:
    """The ASCII letters and digits of `text` after NFKC (full-width and other compatibility
    forms folded; zero-width, format characters, spaces and punctuation gone)."""
    if not text.isascii():
        text = unicodedata.normalize("NFKC", text)
    # bytes.translate deletes at C speed (a regex substitution was 30x slower on prose)
    return text.encode("ascii", "ignore").translate(None, _NOT_ALNUM).decode()


def _encoded_cores(raw: bytes, bits: int, encode: Callable[[bytes], bytes]) -> list[str]:
    """The part of `encode(x + raw + y)` that depends on `raw` alone, for every alignment of
    `raw` in the encoded stream (x of 0 … bits-1 bytes): base64 (6 bits a character) and base32
    (5) encode bytes in groups, so an embedded secret's encoding depends on its offset."""
    cores = []
    for k in range(bits if bits != 4 else 1):
        encoded = encode(b"\0" * k + raw).decode().rstrip("=")
        start = -(-(8 * k) // bits)  # characters that hold bits of the prefix
        end = (8 * (k + len(raw))) // bits  # the last one may hold bits of what follows
        cores.append(encoded[start:end])
    return cores


def disguises(secret: str) -> set[str]:
    """The letter-and-digit views of a secret's disguised forms, as `alnum_view` reads them."""
    raw = secret.encode()
    forms = {secret, secret[::-1], raw.hex(), raw.hex().upper()}
    forms.update(_encoded_cores(raw, 6, base64.b64encode))
    forms.update(_encoded_cores(raw, 5, base64.b32encode))
    return {v for v in (alnum_view(f) for f in forms) if len(v) >= NEEDLE_MIN}


class Redactor:
    """Masks secrets in text and in nested values. Cheap to call; safe to call twice (and a second
    call with the same text object is a dictionary lookup). Thread-safe: the bot's trace writer
    redacts on its own thread."""

    def __init__(self, secret_values: Iterable[str] = (), *, extra_patterns: Iterable[str] = ()):
        self._secrets: list[str] = []  # longest first, so a secret containing another goes whole
        self._needles: list[str] = []  # their disguised forms, letters and digits only (alnum_view)
        self._needle_ends: dict[str, list[tuple[str, int]]] = {}
        self._needle_max = 0
        self._prefix_ends: dict[str, list[tuple[str, int]]] = {}
        self._extra = [re.compile(p) for p in extra_patterns]
        # id(text) → (text, its redaction, generation); the entry holds the text, so its id is
        # not reused. No lock: single dictionary operations are atomic, and a lock shared with
        # the trace writer's thread could stall the event loop when that thread is preempted.
        # An OrderedDict: its oldest entry goes in O(1) (a dict's first key is found by walking
        # the slots its earlier deletions left behind).
        self._memo: OrderedDict[int, tuple[str, str, int]] = OrderedDict()
        self._generation = 0  # bumped by add_secrets: what was remembered before is not used
        self.scans = 0  # texts actually scanned (benches count them)
        self.add_secrets(secret_values)

    # -- configuration --------------------------------------------------------------------------
    def add_secrets(self, values: Iterable[str]) -> None:
        """Register more secret values (e.g. a token loaded after start-up)."""
        known = set(self._secrets)
        for raw in values:
            if not isinstance(raw, str):
                continue
            v = raw.strip()
            if len(v) < MIN_SECRET_LEN:
                continue  # too short to mask without mangling ordinary text
            known.update({v, urllib.parse.quote(v, safe="")})
        self._secrets = sorted(known, key=len, reverse=True)
        self._needles = sorted({n for v in self._secrets for n in disguises(v)}, key=len, reverse=True)
        # last character → (needle, length of each of its prefixes ending in it), for a stream's
        # tail that may be the start of a disguised secret
        needle_ends: dict[str, list[tuple[str, int]]] = {}
        for needle in self._needles:
            for k in range(len(needle) - 1, 0, -1):
                needle_ends.setdefault(needle[k - 1], []).append((needle, k))
        # longest first: the first prefix a tail ends with is the one to hold back
        self._needle_ends = {c: sorted(ends, key=lambda e: -e[1]) for c, ends in needle_ends.items()}
        self._needle_max = max((len(n) for n in self._needles), default=0)
        self._generation += 1  # what was clean may not be any more
        self._memo = OrderedDict()
        # char → (secret, length of each proper prefix ending in it), longest first: a stream
        # holds back a tail that starts a secret (safe_length)
        ends: dict[str, list[tuple[str, int]]] = {}
        for secret in self._secrets:
            for k in range(len(secret) - 1, 0, -1):
                ends.setdefault(secret[k - 1], []).append((secret, k))
        self._prefix_ends = ends

    # -- redaction ------------------------------------------------------------------------------
    def text(self, s: str) -> str:
        if not s or len(s) < MIN_SECRET_LEN:
            return s
        known = self._memo.get(id(s))
        if known is not None and known[0] is s and known[2] == self._generation:
            return known[1]
        generation = self._generation
        out = self._scan(s)
        if len(s) <= MEMO_MAX_CHARS:
            self._remember(s, out, generation)
        return out

    def _remember(self, s: str, out: str, generation: int) -> None:
        # Only `s` itself: masking is not strictly idempotent (a configured value can overlap a
        # mask's edge), so what came out is scanned again when it is masked again.
        memo = self._memo
        memo[id(s)] = (s, out, generation)
        while len(memo) > MEMO_ENTRIES:
            try:
                memo.popitem(last=False)  # the oldest
            except KeyError:  # another thread got there first
                break

    def _scan(self, s: str) -> str:
        self.scans += 1
        for secret in self._secrets:
            if secret in s:
                s = s.replace(secret, MASK)
        if self._needles and len(s) >= NEEDLE_MIN:
            view = alnum_view(s)
            if any(n in view for n in self._needles):
                s = self._mask_disguised(s)
        if len(s) >= _SHAPE_MIN_WORD:
            for word in {m.group() for m in _TOKEN_RUN.finditer(s)}:
                if _ANY_SHAPE.search(word) is None:
                    continue
                masked = word
                for shape in _SHAPES:
                    masked = shape.sub(MASK, masked)
                if masked != word:
                    s = s.replace(word, masked)
        lower = s.lower()
        if _KV_HINTS.search(lower):
            s = _mask_named_values(s, lower)
        if "bearer" in lower:
            s = _BEARER.sub(r"\1" + MASK, s)
        for pat in self._extra:
            s = pat.sub(_sub_pattern, s)
        return s

    def _mask_disguised(self, s: str) -> str:
        """Mask every span of `s` whose letters and digits spell a needle."""
        kept: list[str] = []
        origin: list[int] = []  # index in `s` of each kept character
        for i, ch in enumerate(s):
            for c in unicodedata.normalize("NFKC", ch) if not ch.isascii() else ch:
                if c.isascii() and c.isalnum():
                    kept.append(c)
                    origin.append(i)
        view = "".join(kept)
        spans: list[tuple[int, int]] = []
        for needle in self._needles:
            at = view.find(needle)
            while at != -1:
                spans.append((origin[at], origin[at + len(needle) - 1] + 1))
                at = view.find(needle, at + 1)
        if not spans:
            return s
        out: list[str] = []
        last = 0
        for start, end in sorted(spans):
            if end <= last:
                continue
            if start >= last:
                out.append(s[last:start])
                out.append(MASK)
            last = end
        out.append(s[last:])
        return "".join(out)

    def secret_prefix_tail(self, s: str, minimum: int = 4) -> int:
        """The length of the longest end of `s` that begins a configured secret (at least
        `minimum` characters): held back at the end of one send in case the next completes it."""
        best = 0
        for secret, k in self._prefix_ends.get(s[-1], ()) if s else ():
            if minimum <= k <= len(s) and k > best and s.endswith(secret[:k]):
                best = k
        return best

    def text_after(self, context: str, s: str) -> str:
        """`s` redacted as it reads after `context` (which is not part of the result): a key
        begun in `context` is masked where it goes on in `s`."""
        if not context:
            return self.text(s)
        before, whole = self.text(context), self.text(context + s)
        same = 0
        for a, b in zip(before, whole, strict=False):
            if a != b:
                break
            same += 1
        return whole[same:]

    def safe_length(self, s: str) -> int:
        """How much of a text that is still growing (a streamed answer) can be shown now: all but
        a tail that may yet turn into a secret — the trailing run of printable ASCII (every token
        shape is made of it) and any suffix that starts a configured secret value."""
        end = len(s)
        while end > 0 and "!" <= s[end - 1] <= "~":
            end -= 1
        if s:
            # only prefixes ending in the text's last character can be its suffix
            for secret, k in self._prefix_ends.get(s[-1], ()):
                if k <= len(s) and len(s) - k < end and s.endswith(secret[:k]):
                    end = len(s) - k
        return end

    def disguise_tail_start(self, s: str, minimum: int = DISGUISE_HOLD_MIN, after: str = "") -> int:
        """Where a tail of `s` starts whose letters and digits begin a disguised secret (a
        letter-spaced or zero-width-split key still arriving), at least `minimum` of them;
        len(s) if there is none. `after`: text known to follow `s`, which the secret's rest
        must agree with (a tail it contradicts is not held)."""
        if not self._needle_ends or not s:
            return len(s)
        view = alnum_view(s[-4 * self._needle_max :])
        if not view:
            return len(s)
        more = alnum_view(after[: 4 * self._needle_max]) if after else ""
        longest = 0
        size = len(view)
        for needle, k in self._needle_ends.get(view[-1], ()):
            if k < minimum:
                break
            if (
                k <= size
                and view.endswith(needle[:k])
                and more[: len(needle) - k] == needle[k : k + len(more)]
            ):
                longest = k
                break
        if not longest:
            return len(s)
        # walk back over `longest` letters and digits (and whatever lies between them)
        i, counted = len(s), 0
        while i > 0 and counted < longest:
            i -= 1
            ch = s[i]
            folded = ch if ch.isascii() else unicodedata.normalize("NFKC", ch)
            counted += sum(1 for c in folded if c.isascii() and c.isalnum())
        return i

    def value(self, obj: Any) -> Any:
        """Deep copy of `obj` with secrets masked: dict values under sensitive keys, header-style
        (name, value) pairs, and every string. Other leaf types are returned unchanged."""
        if isinstance(obj, str):
            return self.text(obj)
        if isinstance(obj, dict):
            out: dict[Any, Any] = {}
            for k, v in obj.items():
                if isinstance(k, str) and is_sensitive_key(k) and v not in (None, "", [], {}):
                    out[k] = MASK
                else:
                    out[k] = self.value(v)
            return out
        if isinstance(obj, list | tuple):
            if len(obj) == 2 and isinstance(obj[0], str) and is_sensitive_key(obj[0]):
                pair = (obj[0], MASK)
                return list(pair) if isinstance(obj, list) else pair
            items = [self.value(v) for v in obj]
            return items if isinstance(obj, list) else tuple(items)
        if isinstance(obj, set | frozenset):
            return [self.value(v) for v in obj]
        if isinstance(obj, bytes | bytearray):
            return obj  # callers decode first if they want bytes redacted
        return obj

    __call__ = text


def redact_strings(obj: Any, text: Callable[[str], str]) -> Any:
    """`obj` with `text` applied to every string in it (keys and structure unchanged): for values
    whose meaning must survive (tool arguments), unlike `Redactor.value`, which masks whole values
    under sensitive key names."""
    if isinstance(obj, str):
        return text(obj)
    if isinstance(obj, dict):
        return {k: redact_strings(v, text) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        items = [redact_strings(v, text) for v in obj]
        return items if isinstance(obj, list) else tuple(items)
    return obj


def redact_message(message: Message, text: Callable[[str], str]) -> Message:
    """`message` with secrets masked in its text, tool results and tool-call arguments; the same
    object when nothing changed. Signed thinking is left alone (the provider checks it verbatim;
    it is never shown)."""
    parts: list[Any] = []
    changed = False
    for part in message.parts:
        new: Any = part
        if isinstance(part, TextPart):
            masked = text(part.text)
            if masked != part.text:
                new = part.model_copy(update={"text": masked})
        elif isinstance(part, ToolResultPart):
            masked = text(part.content)
            if masked != part.content:
                new = part.model_copy(update={"content": masked})
        elif isinstance(part, ToolCallPart) and part.arguments:
            args = redact_strings(part.arguments, text)
            if args != part.arguments:
                new = part.model_copy(update={"arguments": args, "raw_arguments": text(part.raw_arguments)})
        elif isinstance(part, ThinkingPart) and part.signature is None:
            masked = text(part.text)
            if masked != part.text:
                new = part.model_copy(update={"text": masked})
        changed = changed or new is not part
        parts.append(new)
    return message.model_copy(update={"parts": tuple(parts)}) if changed else message


class StreamRedactor:
    """Redacts a text that arrives in pieces, as a stream of pieces that are safe to show: a
    secret split across chunk boundaries never shows, not even its first half in an interim
    edit. `feed` returns what may be appended now (possibly nothing: a tail is held back until it
    is known not to be a secret), `flush` the rest when the text is complete.

    Finished lines are committed (redacted once, then left alone), so a long answer costs a
    redaction of its open line per chunk, not of the whole text. A line is not committed while it
    ends in a way a mask could continue past ("api_key:", "Bearer", a quote)."""

    SEGMENT_MAX = 80  # an open segment longer than this may also be committed at a space

    def __init__(self, redactor: Redactor, context: str = ""):
        """`context`: the end of an earlier send of the same answer, already shown: not shown
        again, but read with what follows, so a key begun there is masked where it goes on."""
        self.redactor = redactor
        self._raw = context  # the open (uncommitted) segment
        self._shown = redactor.text(context) if context else ""  # what was shown of it, redacted

    def feed(self, delta: str) -> str:
        self._raw += delta
        safe = self.redactor.safe_length(self._raw)
        out = ""
        cut = self._boundary(safe)
        if cut:
            head = self.redactor.text(self._raw[:cut])
            carried = ""  # what was shown already of the text after the cut
            if self._shown.startswith(head):
                carried = self._shown[len(head) :]
            else:
                out = self._show(head, final=True)
            self._raw, self._shown, safe = self._raw[cut:], carried, safe - cut
        visible = self.redactor.text(self._raw[:safe])
        # after masking: a tail whose letters and digits begin a disguised secret waits
        visible = visible[: self.redactor.disguise_tail_start(visible)]
        return out + self._show(visible, final=False)

    def flush(self) -> str:
        out = self._show(self.redactor.text(self._raw), final=True)
        self._raw, self._shown = "", ""
        return out

    def flush_holding(self) -> tuple[str, str]:
        """The end of one send when more of the same answer may follow (a tool round): all of
        it but an end that begins a configured secret or a disguise of one, returned raw to be
        fed first into the next send's redactor — so a secret split across the two is masked
        whole."""
        raw = self._raw
        # a shorter beginning (one or two characters) is shown; the next send, given this one as
        # its context, masks the rest
        keep = max(self.redactor.secret_prefix_tail(raw), len(raw) - self.redactor.disguise_tail_start(raw))
        held = self._raw[len(self._raw) - keep :] if keep else ""
        self._raw = self._raw[: len(self._raw) - keep]
        return self.flush(), held

    def _show(self, redacted: str, *, final: bool) -> str:
        shown = self._shown
        if redacted.startswith(shown):
            piece = redacted[len(shown) :]
        elif not final:
            return ""  # a mask reached back into what was shown: wait for the segment's end
        else:  # (rare) show the redacted rest after what both agree on
            keep = 0
            while keep < min(len(shown), len(redacted)) and shown[keep] == redacted[keep]:
                keep += 1
            piece = redacted[keep:]
        self._shown = shown + piece
        return piece

    def _boundary(self, safe: int) -> int:
        """Where the open segment may be committed (0: nowhere yet)."""
        raw = self._raw
        cut = raw.rfind("\n", 0, safe) + 1
        if not cut and safe > self.SEGMENT_MAX:
            cut = max(raw.rfind(" ", 0, safe), raw.rfind("\t", 0, safe)) + 1
            if not cut and ord(raw[safe - 1]) > 127 and not _KV_HINTS.search(raw[:safe].lower()):
                cut = safe  # a long run of CJK text: after a non-ASCII character no shape goes on
        if not cut:
            return 0
        head = raw[:cut]
        if self.redactor.safe_length(head) != cut or _continues(head):
            return 0
        masked = self.redactor.text(head)
        tail = self.redactor.disguise_tail_start(masked, minimum=1, after=raw[cut:safe])
        if tail == len(masked):
            return cut
        # A letter-spaced or line-split secret may go on past the cut, after as little as its
        # first character (a committed segment is never looked at again): commit only what lies
        # before that tail. Nothing before it can continue past the tail, which stays open.
        if masked != head or tail == 0:
            return 0
        if self.redactor.safe_length(head[:tail]) != tail or _continues(head[:tail]):
            return 0
        return tail


def _continues(head: str) -> bool:
    """True when a mask could reach past the end of `head` ("token:", "Bearer", a quote …)."""
    stripped = head.rstrip()
    if not stripped:
        return False
    if stripped[-1] in ":=\"'":
        return True
    last = stripped.rsplit(None, 1)[-1].lower()
    return last in ("bearer", "basic", "bot", "token") or _KV_HINTS.search(last) is not None


class RedactingFilter(logging.Filter):
    """Redacts a log record in place: the formatted message (msg % args), the exception text and
    the stack text. Put it on *handlers* — a filter on the root logger itself does not see
    records propagated from child loggers (httpx, telegram, ...). `install_log_redaction`
    covers every record regardless of handlers."""

    def __init__(self, redactor: Redactor, name: str = ""):
        super().__init__(name)
        self.redactor = redactor

    def filter(self, record: logging.LogRecord) -> bool:
        redact_record(record, self.redactor)
        return True


def redact_record(record: logging.LogRecord, redactor: Redactor) -> None:
    if getattr(record, "_tapebot_redacted", False):
        return
    try:
        message = record.getMessage()
    except Exception:  # noqa: BLE001 — a broken format string must not break logging
        message = str(record.msg)
    record.msg = redactor.text(message)
    record.args = None
    if record.exc_info and not record.exc_text:
        record.exc_text = logging.Formatter().formatException(record.exc_info)
    if record.exc_text:
        record.exc_text = redactor.text(record.exc_text)
        # Formatters append exc_text when set; dropping exc_info stops them re-rendering the
        # unredacted traceback (whose exception message may hold a token-bearing URL).
        record.exc_info = None
    if record.stack_info:
        record.stack_info = redactor.text(record.stack_info)
    record._tapebot_redacted = True


# The redactors installed on log records, newest last (two Apps in one process install theirs
# and may stop in either order), and the factory that was there before the first.
_LOG_REDACTORS: list[Redactor] = []
_previous_factory: Callable[..., logging.LogRecord] | None = None


def _redacting_factory(*args: Any, **kwargs: Any) -> logging.LogRecord:
    assert _previous_factory is not None
    record = _previous_factory(*args, **kwargs)
    if _LOG_REDACTORS:
        redact_record(record, _LOG_REDACTORS[-1])
    return record


def install_log_redaction(redactor: Redactor) -> Callable[[], None]:
    """Redact every LogRecord at creation, whatever logger or handler it goes through.
    Returns a function that takes this redactor out again (the previous factory is back once the
    last one is out, whatever the order)."""
    global _previous_factory
    if not _LOG_REDACTORS:
        _previous_factory = logging.getLogRecordFactory()
        logging.setLogRecordFactory(_redacting_factory)
    _LOG_REDACTORS.append(redactor)

    def uninstall() -> None:
        global _previous_factory
        if redactor in _LOG_REDACTORS:
            _LOG_REDACTORS.remove(redactor)
        if not _LOG_REDACTORS and _previous_factory is not None:
            if logging.getLogRecordFactory() is _redacting_factory:
                logging.setLogRecordFactory(_previous_factory)
            _previous_factory = None

    return uninstall
