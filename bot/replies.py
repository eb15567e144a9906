"""Reading the user's next message as the answer to a WaitingState.

Button presses are exact. Text is interpreted conservatively: clear yes/no words in English and
Chinese, an option number or ordinal ("2", "the second one", "第二个"), or a value for the pending
field. A command or a clear change of mind means the user moved on. Answers to approval cards
are not read here but by agent/consent.read_consent, the one decision function of every surface.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

from agent import WaitingState

YES = {
    "yes",
    "y",
    "ok",
    "okay",
    "sure",
    "yep",
    "yeah",
    "go",
    "go ahead",
    "confirm",
    "approve",
    "好",
    "好的",
    "是",
    "是的",
    "确认",
    "可以",
    "行",
    "嗯",
    "对",
    "同意",
    "执行",
}
NO = {
    "no",
    "n",
    "nope",
    "cancel",
    "deny",
    "stop",
    "don't",
    "dont",
    "不",
    "不用",
    "取消",
    "不要",
    "否",
    "拒绝",
    "别",
    "算了吧",
}
MOVED_ON = re.compile(
    r"^(never ?mind|forget (it|that)|something else|new (topic|question)|actually,? |instead,? )|"
    r"^(算了|换个话题|不说这个|先不管|另外问|换一个问题)",
    re.IGNORECASE,
)
ORDINALS = {
    "first": 1,
    "second": 2,
    "third": 3,
    "fourth": 4,
    "1st": 1,
    "2nd": 2,
    "3rd": 3,
    "4th": 4,
    "第一": 1,
    "第二": 2,
    "第三": 3,
    "第四": 4,
    "一": 1,
    "二": 2,
    "三": 3,
    "四": 4,
}
_STRIP = re.compile(r"[\s!！。.,，?？~～]+$")


@dataclass(frozen=True, slots=True)
class Reading:
    kind: Literal["yes", "no", "option", "value", "moved_on", "unclear"]
    value: str = ""


def _norm(text: str) -> str:
    return _STRIP.sub("", text.strip().lower())


def option_index(text: str, n_options: int) -> int | None:
    """1-based option chosen by "2", "#2", "option 2", "the second one", "第二个"."""
    s = _norm(text)
    m = re.fullmatch(r"(?:#|no\.?\s*|option\s*|选项?\s*|第)?\s*(\d)\s*(?:个|项|号)?", s)
    if m:
        i = int(m.group(1))
        return i if 1 <= i <= n_options else None
    m = re.fullmatch(r"(?:the\s+)?(first|second|third|fourth|1st|2nd|3rd|4th)(?:\s+one)?", s)
    if m:
        i = ORDINALS[m.group(1)]
        return i if i <= n_options else None
    m = re.fullmatch(r"(?:选)?(第[一二三四])(?:个|项|种)?", s)
    if m:
        i = ORDINALS[m.group(1)]
        return i if i <= n_options else None
    return None


def read_reply(text: str, waiting: WaitingState, *, is_command: bool = False) -> Reading:
    if is_command:
        return Reading("moved_on")
    raw = text.strip()
    s = _norm(raw)
    if waiting.options:
        i = option_index(raw, len(waiting.options))
        if i is not None:
            return Reading("option", waiting.options[i - 1])
        for opt in waiting.options:
            if s == _norm(opt):
                return Reading("option", opt)
    if s in YES:
        return Reading("yes", raw)
    if s in NO:
        return Reading("no", raw)
    if MOVED_ON.search(raw):
        return Reading("moved_on")
    if waiting.kind == "question" and (waiting.pending_fields or not waiting.options):
        return Reading("value", raw)
    if waiting.kind == "question":
        return Reading("value", raw)  # free text is always accepted for questions
    return Reading("unclear", raw)
