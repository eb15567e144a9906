"""Tool schemas written without pydantic (agent/tools/schema.py) are byte for byte the ones
pydantic writes: for every registered tool, and for generated signatures of the plain types. The
argument validator, built on a tool's first call, still validates."""

from __future__ import annotations

import json
from typing import Any, Literal, Optional

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agent.errors import InvalidToolArguments
from agent.tools.registry import ToolContext, Toolset, _args_model, _schema_of, build_tool
from agent.tools.schema import REQUIRED, Unsupported, arguments_schema


def _all_toolsets() -> list[Toolset]:
    from agent.background_tools import background_tools
    from agent.skills import skill_tools
    from agent.subagents import subagent_tools
    from agent.tools.builtin import local_tools
    from agent.tools.core import core_tools
    from markets.tools import market_tools
    from memory.tools import memory_tools
    from scheduler.tools import schedule_tools

    return [
        core_tools,
        local_tools,
        market_tools,
        memory_tools,
        background_tools,
        skill_tools,
        subagent_tools,
        schedule_tools,
    ]


def _exact(schema: dict[str, Any]) -> str:
    return json.dumps(schema, ensure_ascii=False)  # key order counts: what the model is sent


def test_every_registered_tool_has_pydantics_schema_byte_for_byte():
    tools = [t for ts in _all_toolsets() for t in ts]
    assert len(tools) >= 40
    lazy = [t for t in tools if t._make_model is not None]  # registered without a model
    assert len(lazy) >= len(tools) - 2  # nearly all take the plain path (update_plan does not)
    for tool in tools:
        assert _exact(tool.spec.parameters) == _exact(_schema_of(tool.args_model)), tool.name


SCALAR = st.sampled_from([str, int, float, bool])
WORDS = st.lists(
    st.sampled_from(["a", "b", "buy", "sell", "cn", "crypto", "x_y"]), min_size=2, max_size=4, unique=True
)


def _types() -> st.SearchStrategy[Any]:
    literal = WORDS.map(lambda ws: Literal[tuple(ws)])  # type: ignore[valid-type]
    base = st.one_of(SCALAR, literal)
    nested = st.recursive(
        base,
        lambda inner: st.one_of(
            inner.map(lambda t: list[t]),  # type: ignore[valid-type]
            inner.map(lambda t: dict[str, t]),  # type: ignore[valid-type]
        ),
        max_leaves=3,
    )
    return st.one_of(
        nested,
        nested.map(lambda t: t | None),  # type: ignore[operator]
        nested.map(lambda t: Optional[t]),  # noqa: UP045 - the typing spelling too
        st.just(dict[str, Any]),
        st.just(dict[str, Any] | None),
    )


def _default_for(ann: Any) -> st.SearchStrategy[Any]:
    plain = st.one_of(
        st.none(),
        st.booleans(),
        st.integers(-1000, 1000),
        st.floats(allow_nan=False, allow_infinity=False),
        st.text(max_size=8),
        st.lists(st.text(max_size=3), max_size=3),
        st.tuples(st.integers(0, 9), st.integers(0, 9)),
    )
    return st.one_of(st.just(REQUIRED), plain)  # pydantic writes an unvalidated default as given


FIELD = st.tuples(_types(), st.text(max_size=20).map(lambda s: s or None)).flatmap(
    lambda td: _default_for(td[0]).map(lambda d: (td[0], d, td[1]))
)
NAMES = st.lists(st.from_regex(r"[a-z][a-z0-9_]{0,11}", fullmatch=True), max_size=6, unique=True)


@settings(max_examples=300)
@given(
    NAMES.flatmap(
        lambda names: st.tuples(*[FIELD for _ in names]).map(lambda fs: dict(zip(names, fs, strict=True)))
    )
)
def test_generated_signatures_match_pydantic(fields):
    try:
        fast = arguments_schema(fields)
    except Unsupported:
        return  # the registry asks pydantic for these
    assert _exact(fast) == _exact(_schema_of(_args_model("GeneratedArgs", fields)))


@pytest.mark.parametrize(
    "ann, default",
    [(Any, REQUIRED), (Literal["only"], REQUIRED), (Literal[1, 2], REQUIRED), (int | str, REQUIRED),
     (tuple[int, int], REQUIRED), (str, float("inf")), (str, object())],
)  # fmt: skip
def test_anything_else_is_left_to_pydantic(ann, default):
    with pytest.raises(Unsupported):
        arguments_schema({"x": (ann, default, None)})


async def test_the_validator_built_on_first_call_still_validates():
    async def pick(
        ctx: ToolContext, code: str, side: Literal["buy", "sell"], qty: float | None = None
    ) -> str:
        """Pick.

        Args:
            code: a code.
            side: buy or sell.
            qty: how many.
        """
        return f"{code} {side} {qty}"

    tool = build_tool(pick)
    assert tool._args_model is None  # not built at registration
    assert await tool.call(ToolContext(), {"code": "600519", "side": "buy", "qty": 100}) == "600519 buy 100.0"
    for bad in (
        {"code": "600519", "side": "hold"},
        {"side": "buy"},
        {"code": "x", "side": "buy", "extra": 1},
    ):
        with pytest.raises(InvalidToolArguments):
            tool.validate(bad)
    assert _exact(tool.spec.parameters) == _exact(_schema_of(tool.args_model))
