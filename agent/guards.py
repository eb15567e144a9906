"""Loop guards: stop a turn that repeats itself or runs too long.

- Doom loop: the same tool with the same arguments 3 times within the last 6 calls of a turn, or
  (for argument text of at least 50 characters) 3 calls whose arguments are near-identical by
  character-3-gram Jaccard ≥ 0.8. Checked *before* a call runs, so a looping call never executes.
- Required tools: a turn whose intent needs a tool ("what do I hold") and ends without calling it
  gets at most 2 corrective retries, then a visible warning.
"""

from __future__ import annotations

import re
from collections import deque
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field

from agent.messages import Message, ToolCallPart

MAX_TOOL_ROUNDS = 15
MAX_REQUIRED_TOOL_RETRIES = 2
DOOM_LOOP_WINDOW = 6
DOOM_LOOP_THRESHOLD = 3
FUZZY_MIN_CHARS = 50
FUZZY_JACCARD = 0.8
DOOM_LOOP_EXEMPT = frozenset({"check_background_tasks", "update_plan"})


def _trigrams(text: str) -> set[str]:
    return {text[i : i + 3] for i in range(max(len(text) - 2, 1))}


def jaccard(a: str, b: str) -> float:
    ta, tb = _trigrams(a), _trigrams(b)
    return len(ta & tb) / len(ta | tb) if ta | tb else 1.0


@dataclass
class DoomLoopGuard:
    window: deque[tuple[str, str]] = field(default_factory=lambda: deque(maxlen=DOOM_LOOP_WINDOW))

    def check(self, call: ToolCallPart) -> bool:
        """Record the call; True if it completes a loop (and must not run)."""
        if call.name in DOOM_LOOP_EXEMPT:
            return False
        text = call.arguments_text
        self.window.append((call.name, text))
        same = sum(1 for name, t in self.window if name == call.name and t == text)
        if same >= DOOM_LOOP_THRESHOLD:
            return True
        if len(text) >= FUZZY_MIN_CHARS:
            similar = sum(
                1 for name, t in self.window if name == call.name and jaccard(t, text) >= FUZZY_JACCARD
            )
            return similar >= DOOM_LOOP_THRESHOLD
        return False


# ---- required-tool expectations -------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class Expectation:
    tool: str
    args: tuple[tuple[str, str], ...] = ()
    label: str = ""

    def satisfied_by(self, calls: list[ToolCallPart]) -> bool:
        for c in calls:
            if c.name == self.tool and all((c.arguments or {}).get(k) == v for k, v in self.args):
                return True
        return False


_VIEW = re.compile(
    r"(我(有|的)(什么|哪些)?持仓|持仓列表|我买了(啥|什么)|我的仓位|what do i (hold|own)|my (portfolio|holdings|positions)"
    r"|how is my portfolio|show (me )?my (portfolio|holdings|positions))",
    re.IGNORECASE,
)
_DIAGNOSE = re.compile(
    r"(持仓(健康|体检|诊断)|帮我看看持仓|审判我的持仓|diagnose my (portfolio|holdings)|check ?up my (portfolio|holdings)"
    r"|are my (holdings|positions) healthy)",
    re.IGNORECASE,
)
_WRAPPED = re.compile(r"<current-user-message>(.*?)</current-user-message>", re.DOTALL)


def _raw_user_text(message: Message) -> str:
    text = message.text
    m = _WRAPPED.search(text)
    return m.group(1) if m else text


def resolve_expectation(messages: list[Message], available: AbstractSet[str]) -> Expectation | None:
    """What tool this turn must call, judged from the last real user message (recalled memories
    inside the wrapper never trigger an expectation)."""
    if "portfolio" not in available:  # the only tool expected: nothing to read without it
        return None
    for msg in reversed(messages):
        if msg.role == "user" and not msg.meta.get("notification") and not msg.meta.get("internal_retry"):
            text = _raw_user_text(msg)
            break
    else:
        return None
    if _DIAGNOSE.search(text):
        return Expectation("portfolio", (("mode", "diagnose"),), "portfolio diagnosis")
    if _VIEW.search(text):
        return Expectation("portfolio", (), "holdings data")
    return None


def retry_message(exp: Expectation, assistant_text: str) -> str:
    if re.search(r"(计划|plan|first|then|然后|先.*再)", assistant_text, re.IGNORECASE):
        lead = "You only described a plan and did not execute it."
    elif assistant_text.strip():
        lead = "You answered with text only, without the data this question needs."
    else:
        lead = "This round returned no valid tool call."
    return f"{lead} Call the `{exp.tool}` tool now to get the {exp.label or exp.tool}, then answer from its result."


def missing_tool_warning(exp: Expectation) -> str:
    return (
        f"⚠ The model did not call the required tool `{exp.tool}` ({exp.label or exp.tool}) after "
        f"{MAX_REQUIRED_TOOL_RETRIES} reminders; the answer below may be unreliable.\n\n"
    )
