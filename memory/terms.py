"""Text helpers shared by long-term memory, recall and the archive: stock codes, Chinese keywords,
normalisation and bigram similarity, and safe full-text queries.

Chinese has no spaces, so SQLite's default tokenizer sees a whole sentence as one token (a
plain index matched almost nothing). We index memories with FTS5's `trigram` tokenizer (any substring of ≥3
characters); 2-character words such as 追涨 / 止损 are matched as escaped LIKE keywords.
Every query term is double-quoted (internal quotes doubled), so `?`, `*`, `AND`, parentheses or an
unbalanced quote are literal text and never an FTS5 syntax error.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable, Iterable

CODE_RE = re.compile(r"(?<!\d)(\d{6})(?!\d)")
_CJK = "\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff"
CJK_RUN_RE = re.compile(f"[{_CJK}]+")
ASCII_WORD_RE = re.compile(r"[A-Za-z][A-Za-z0-9_.+-]*[A-Za-z0-9]|[A-Za-z]")
_NORMALISE_RE = re.compile(r"[\W_]+", re.UNICODE)

CodeResolver = Callable[[str], list[str]]

# Function words and chat filler: split points for keyword extraction (longest first).
STOPWORDS = tuple(
    sorted(
        {
            "我想",
            "我要",
            "我们",
            "你们",
            "他们",
            "现在",
            "可以",
            "是否",
            "能不能",
            "可不可以",
            "怎么",
            "怎么样",
            "什么",
            "为什么",
            "如何",
            "一下",
            "帮我",
            "帮忙",
            "看看",
            "看下",
            "请问",
            "还是",
            "或者",
            "以及",
            "这个",
            "那个",
            "这些",
            "那些",
            "这只",
            "那只",
            "这支",
            "今天",
            "明天",
            "昨天",
            "目前",
            "已经",
            "应该",
            "是不是",
            "有没有",
            "一个",
            "一些",
            "没有",
            "然后",
            "因为",
            "所以",
            "但是",
            "如果",
            "的话",
            "觉得",
            "认为",
            "知道",
            "告诉",
            "分析",
            "一只",
            "股票",
            "用户",
            "偏好",
            "喜欢",
            "希望",
            "需要",
            "的",
            "了",
            "吗",
            "呢",
            "吧",
            "啊",
            "呀",
            "么",
            "我",
            "你",
            "他",
            "她",
            "它",
            "是",
            "在",
            "和",
            "与",
            "及",
            "或",
            "也",
            "都",
            "就",
            "还",
            "很",
            "太",
            "这",
            "那",
            "哪",
            "些",
            "没",
            "不",
            "嘛",
            "哦",
            "呗",
        },
        key=len,
        reverse=True,
    )
)
# Generic trading verbs: they match half of all memories, so they never act as keywords (seed).
GENERIC_TRADE_WORDS = frozenset(
    {
        "建仓",
        "买入",
        "卖出",
        "持仓",
        "止损",
        "止盈",
        "加仓",
        "减仓",
        "股价",
        "走势",
        "行情",
        "操作",
        "交易",
    }
)
ASCII_STOPWORDS = frozenset(
    {
        "the", "and", "for", "you", "are", "can", "should", "what", "how", "with", "this", "that", "now",
        "buy", "sell", "stock", "please", "about", "would", "could", "does", "have", "has", "not", "but",
        "user", "prefers", "prefer", "likes", "want", "wants", "today", "there", "their", "from", "into",
    }
)  # fmt: skip
_STOP_RE = re.compile("|".join(re.escape(w) for w in STOPWORDS))


def extract_codes(text: str) -> list[str]:
    """6-digit stock codes in order of appearance, without duplicates."""
    return list(dict.fromkeys(CODE_RE.findall(text or "")))


def default_code_resolver(text: str) -> list[str]:
    """Only explicit 6-digit codes (the markets stock list supplies names → codes when wired)."""
    return extract_codes(text)


def normalise(text: str) -> str:
    return _NORMALISE_RE.sub("", (text or "").lower())


def char_bigrams(text: str) -> set[str]:
    norm = normalise(text)
    if len(norm) < 2:
        return {norm} if norm else set()
    return {norm[i : i + 2] for i in range(len(norm) - 1)}


def bigram_similarity(a: str, b: str) -> float:
    """Jaccard similarity of normalised character bigrams (a deterministic dedup)."""
    x, y = char_bigrams(a), char_bigrams(b)
    if not x or not y:
        return 0.0
    return len(x & y) / len(x | y)


def containment(part: str, whole: str) -> float:
    """Share of `part`'s bigrams that occur in `whole` (0..1)."""
    x = char_bigrams(part)
    if not x:
        return 0.0
    return len(x & char_bigrams(whole)) / len(x)


def _content_runs(text: str) -> list[str]:
    """CJK runs left after removing codes and splitting at stopwords."""
    cleaned = CODE_RE.sub(" ", text or "")
    cleaned = _STOP_RE.sub(" ", cleaned)
    return CJK_RUN_RE.findall(cleaned)


def extract_keywords(text: str, limit: int = 5, extra_stop: Iterable[str] = ()) -> list[str]:
    """Up to `limit` keywords: 2-character runs whole, longer runs as their 2-grams (建仓位置 →
    建仓, 仓位, 位置), stopwords and generic trade words dropped, plus ASCII words of ≥3 letters."""
    drop = GENERIC_TRADE_WORDS | set(extra_stop)
    out: list[str] = []
    for run in _content_runs(text):
        grams = [run] if len(run) == 2 else [run[i : i + 2] for i in range(len(run) - 1)]
        out.extend(g for g in grams if len(g) == 2 and g not in drop)
    for word in ASCII_WORD_RE.findall(CODE_RE.sub(" ", text or "")):
        lw = word.lower()
        # Words of ≥3 letters, and short acronyms written in capitals (ST, PE, MA).
        if (len(lw) >= 3 or (len(word) == 2 and word.isupper())) and lw not in ASCII_STOPWORDS:
            out.append(lw)
    return list(dict.fromkeys(out))[:limit]


def fts_quote(term: str) -> str:
    """One FTS5 string literal: the term in double quotes with internal quotes doubled. Inside
    quotes every operator character is literal, so no user text can break the query syntax."""
    return '"' + term.replace('"', '""') + '"'


def trigram_terms(text: str, limit: int = 24) -> list[str]:
    """Query terms for the trigram index: each content run's 3-character windows (whole runs when
    short) and ASCII words of ≥3 characters. Shorter terms cannot match a trigram index; the
    keyword index covers them."""
    out: list[str] = []
    for run in _content_runs(text):
        if len(run) >= 3:
            out.extend(run[i : i + 3] for i in range(len(run) - 2))
    for word in ASCII_WORD_RE.findall(text or ""):
        if len(word) >= 3 and word.lower() not in ASCII_STOPWORDS:
            out.append(word.lower())
    return list(dict.fromkeys(out))[:limit]


def fts_or_query(terms: Iterable[str]) -> str | None:
    """`"a" OR "b" OR …` from already-chosen terms, or None when there is nothing to search."""
    quoted = [fts_quote(t) for t in terms if t and t.strip()]
    return " OR ".join(quoted) if quoted else None


def top_keywords(texts: Iterable[str], limit: int = 80) -> list[str]:
    """The most frequent content words of a text collection (archive metadata)."""
    counts: Counter[str] = Counter()
    for text in texts:
        for run in _content_runs(text):
            if 2 <= len(run) <= 8:
                counts[run] += 1
            for i in range(len(run) - 1):
                gram = run[i : i + 2]
                if gram not in GENERIC_TRADE_WORDS:
                    counts[gram] += 1
        for word in ASCII_WORD_RE.findall(text):
            lw = word.lower()
            if len(lw) >= 3 and lw not in ASCII_STOPWORDS:
                counts[lw] += 1
    return [w for w, _ in counts.most_common(limit)]
