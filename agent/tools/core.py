"""Tools every agent has: asking the user, and showing a plan.

`ask_user` suspends the turn in a WaitingState; the answer arrives later — a button
tap, "yes", "the second one", a value — and the turn resumes exactly where it stopped. With
nobody present it refuses instead of guessing: silence is never consent.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

from agent.approval import Suspend
from agent.errors import InvalidToolArguments, ToolDenied
from agent.ports import PlanStep, WaitingState, WaitingTarget, utcnow
from agent.tools.registry import ToolContext, Toolset

core_tools = Toolset("core")

QUESTION_TTL_HOURS = 24


@core_tools.tool(side_effect="read_only")
async def ask_user(
    ctx: ToolContext,
    question: str,
    options: list[str] = [],  # noqa: B006 - pydantic copies defaults
    pending_field: str = "",
) -> str:
    """Ask the user a question and wait for the answer. Use it when you need a decision or a
    missing value; do not use it to ask for permission to run a tool (the runtime does that).

    Args:
        question: the question, in the user's language.
        options: up to 4 short answer options shown as buttons; free text is always accepted.
        pending_field: the name of the value you need (e.g. "quantity"), if any.
    """
    if ctx.unattended:
        raise ToolDenied("nobody is present to answer; decide conservatively or state what you need")
    if len(options) > 4:
        raise InvalidToolArguments("at most 4 options")
    from datetime import timedelta

    now = utcnow()
    raise Suspend(
        WaitingState(
            kind="question",
            question=question,
            intent=pending_field or "question",
            options=[o[:64] for o in options],
            pending_fields=[pending_field] if pending_field else [],
            confirmation_target=WaitingTarget(call_id=ctx.call_id, tool="ask_user"),
            created_at=now,
            expires_at=now + timedelta(hours=QUESTION_TTL_HOURS),
        )
    )


class PlanStepIn(BaseModel):
    text: str = Field(description="what this step does")
    status: Literal["pending", "in_progress", "done", "skipped"] = "pending"


@core_tools.tool(concurrency_safe=False, side_effect="idempotent")
async def update_plan(ctx: ToolContext, steps: list[PlanStepIn]) -> str:
    """Show the user a multi-step plan and tick steps off as you go. Send the whole plan each time.

    Args:
        steps: the plan's steps in order, each with its status.
    """
    if ctx.turn is None:
        return "plan noted"
    ctx.turn.plan = [PlanStep(text=s.text, status=s.status) for s in steps[:20]]
    done = sum(1 for s in steps if s.status == "done")
    return f"plan updated ({done}/{len(steps)} done)"
