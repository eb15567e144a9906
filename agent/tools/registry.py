"""Tools as typed functions registered by a decorator.

    markets = Toolset("markets")

    @markets.tool(concurrency_safe=True)
    async def analyze_stock(ctx: ToolContext, code: str, days: int = 250) -> dict:
        '''Analyse one stock with the Wyckoff engine.

        Args:
            code: 6-digit code, code with suffix, or name.
            days: how many daily bars to look at.
        '''

The JSON schema is pydantic's, of a model built from the signature (which also validates the
arguments), the description comes from the docstring, per-argument descriptions from its `Args:`
block.
A parameter annotated `ToolContext` receives the call context and is not part of the schema.
Sync functions run in a worker thread so they never block the event loop.
"""

from __future__ import annotations

import asyncio
import inspect
import json
import re
from collections.abc import Awaitable, Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, TypeVar, get_origin, get_type_hints, overload

from pydantic import BaseModel, ConfigDict, ValidationError, create_model

from agent.errors import InvalidToolArguments, ToolFailed, ToolNotFound
from agent.ports import TurnRecord

SideEffect = Literal["read_only", "idempotent", "mutating"]
T = TypeVar("T")
# A tool function keeps its own signature through `@toolset.tool` (it is returned unchanged).
F = TypeVar("F", bound=Callable[..., Any])


@dataclass(frozen=True, slots=True)
class ToolSpec:
    """Everything the runtime, the policy layer and every surface (Anthropic/OpenAI schemas, MCP,
    /help, README) need to know about a tool."""

    name: str
    description: str
    parameters: dict[str, Any]
    concurrency_safe: bool = False
    requires_approval: bool = False
    background: bool = False
    side_effect: SideEffect = "read_only"
    timeout: float | None = None
    toolset: str = ""
    summary: str = ""  # first line of the description, for /help and tables
    # Reaches beyond tapebot's own data whatever the configuration (a model call, the network).
    open_world: bool = False
    # Returns a JSON object (a dict or a pydantic model), so surfaces can promise structured output.
    structured: bool = False
    # The same call (same call id and arguments) never acts twice: the tool finds its earlier
    # outcome by a key derived from the call. A call a crash cut off is then run again on resume
    # (it finds its outcome, or acts once) instead of being reported as "may or may not have run".
    idempotent: bool = False


@dataclass(frozen=True, slots=True)
class Attachment:
    """A file produced by a tool for the user (a chart PNG, a CSV)."""

    path: Path
    mime: str = "image/png"
    caption: str = ""


@dataclass(slots=True)
class ToolOutput:
    """What a tool may return when it has more than content: attachments for the chat."""

    content: Any
    attachments: list[Attachment] = field(default_factory=list)


class Deps:
    """A small type-keyed container for the services tools need (market data, stores, ...).
    Built by the composition root; tools ask for what they use: `ctx.deps.get(MarketData)`."""

    def __init__(self, *services: object, **named: object):
        self._by_type: dict[type, object] = {type(s): s for s in services}
        self._by_name: dict[str, object] = dict(named)

    def add(self, service: object, as_type: type | None = None) -> None:
        self._by_type[as_type or type(service)] = service

    def get(self, kind: type[T]) -> T:
        found = self._by_type.get(kind)
        if found is None:
            for value in self._by_type.values():
                if isinstance(value, kind):
                    found = value
                    break
        if found is None:
            raise LookupError(f"service {kind.__name__} is not configured")
        return found  # type: ignore[return-value]

    def maybe(self, kind: type[T]) -> T | None:
        try:
            return self.get(kind)
        except LookupError:
            return None

    def named(self, name: str) -> object:
        return self._by_name.get(name)


ProgressFn = Callable[[str, str, "float | None"], Awaitable[None]]


async def _no_progress(stage: str, detail: str = "", percent: float | None = None) -> None:
    return None


@dataclass(slots=True)
class ToolContext:
    """Per-call context handed to tools that declare a `ToolContext` parameter."""

    call_id: str = ""
    tool_name: str = ""
    session_id: str = ""
    turn_id: str = ""
    user_id: str = ""
    chat_key: str = ""
    # the book, portfolio, memory and alerts the call acts on: the user's linked account or a
    # group's own; "" means the user's own (`book`)
    account: str = ""
    workspace: Path = field(default_factory=lambda: Path.cwd())
    deps: Deps = field(default_factory=Deps)
    unattended: bool = False
    turn: TurnRecord | None = None  # the live turn (update_plan edits its plan)
    # Where the call came from ("chat", "mcp"): recorded on what it changes (trades).
    source: str = "chat"
    # A caller-supplied idempotency key (an MCP client's): it binds the change by itself, across
    # processes; reused for different arguments it is an error. Empty: the key is derived from the
    # session, tool, arguments and call id (`agent.ports.execution_key`).
    idempotency_key: str = ""
    # This turn has read outside content (web pages, files, command or MCP output) since the
    # user's message: what the model asks to remember now may be that content's words (memory poisoning).
    untrusted_input: bool = False
    _progress: ProgressFn = _no_progress

    async def progress(self, stage: str, detail: str = "", percent: float | None = None) -> None:
        await self._progress(stage, detail, percent)

    @property
    def book(self) -> str:
        """The key of the paper book, portfolio and alerts this call acts on."""
        return self.account or self.user_id or "default"


_ARG_LINE = re.compile(r"^\s{0,8}(\*{0,2}\w+)\s*(?:\([^)]*\))?\s*:\s*(.*)$")


def parse_docstring(doc: str | None) -> tuple[str, dict[str, str]]:
    """Split a Google-style docstring into (description, {arg: description})."""
    if not doc:
        return "", {}
    doc = inspect.cleandoc(doc)
    head, sep, rest = doc.partition("\nArgs:\n")
    args: dict[str, str] = {}
    if sep:
        current = None
        body_lines = []
        for line in rest.splitlines():
            if line and not line.startswith(" ") and line.rstrip().endswith(":"):
                break  # "Returns:" etc.
            m = _ARG_LINE.match(line)
            if m and (line.startswith("    ") and not line.startswith("        ")):
                current = m.group(1)
                args[current] = m.group(2).strip()
            elif current and line.strip():
                args[current] += " " + line.strip()
            elif not line.strip():
                body_lines.append(line)
    return head.strip(), args


def _schema_of(model: type[BaseModel]) -> dict[str, Any]:
    schema = model.model_json_schema()
    schema.pop("title", None)
    for prop in schema.get("properties", {}).values():
        prop.pop("title", None)
    schema.setdefault("properties", {})
    schema["additionalProperties"] = False
    return schema


def _args_model(model_name: str, fields: dict[str, tuple[Any, Any, str | None]]) -> type[BaseModel]:
    from pydantic import Field

    definitions: dict[str, Any] = {
        k: (ann, Field(default, description=doc)) for k, (ann, default, doc) in fields.items()
    }
    return create_model(model_name, __config__=ConfigDict(extra="forbid"), **definitions)


class Tool:
    """A registered function plus its spec and argument validator (a pydantic model)."""

    def __init__(
        self, fn: Callable[..., Any], spec: ToolSpec, args_model: type[BaseModel], ctx_param: str | None
    ):
        self.fn = fn
        self.spec = spec
        self.args_model = args_model
        self.ctx_param = ctx_param
        self.is_async = inspect.iscoroutinefunction(fn)

    @property
    def name(self) -> str:
        return self.spec.name

    def validate(self, arguments: dict[str, Any] | None) -> dict[str, Any]:
        if arguments is None:
            raise InvalidToolArguments("arguments are not a valid JSON object")
        try:
            parsed = self.args_model.model_validate(arguments)
        except ValidationError as exc:
            problems = "; ".join(
                f"{'.'.join(str(p) for p in e['loc']) or '(root)'}: {e['msg']}" for e in exc.errors()[:6]
            )
            raise InvalidToolArguments(f"invalid arguments for {self.name}: {problems}") from None
        return {k: getattr(parsed, k) for k in type(parsed).model_fields}

    async def call(self, ctx: ToolContext, arguments: dict[str, Any] | None) -> Any:
        kwargs = self.validate(arguments)
        if self.ctx_param:
            kwargs[self.ctx_param] = ctx
        if self.is_async:
            return await self.fn(**kwargs)
        return await asyncio.to_thread(self.fn, **kwargs)


def build_tool(
    fn: Callable[..., Any],
    *,
    name: str | None = None,
    description: str | None = None,
    toolset: str = "",
    **flags: Any,
) -> Tool:
    sig = inspect.signature(fn)
    hints = get_type_hints(fn)
    doc_desc, arg_docs = parse_docstring(fn.__doc__)
    fields: dict[str, tuple[Any, Any, str | None]] = {}
    ctx_param: str | None = None
    for pname, param in sig.parameters.items():
        ann = hints.get(pname, Any)
        if ann is ToolContext:
            ctx_param = pname
            continue
        default = ... if param.default is inspect.Parameter.empty else param.default
        fields[pname] = (ann, default, arg_docs.get(pname) or None)
    model_name = "".join(w.capitalize() for w in (name or fn.__name__).split("_")) + "Args"
    args_model = _args_model(model_name, fields)
    parameters = _schema_of(args_model)
    desc = description or doc_desc or (name or fn.__name__)
    spec = ToolSpec(
        name=name or fn.__name__,
        description=desc,
        parameters=parameters,
        toolset=toolset,
        summary=desc.splitlines()[0].strip(),
        structured=_returns_object(hints.get("return")),
        **flags,
    )
    return Tool(fn, spec, args_model, ctx_param)


def _returns_object(annotation: Any) -> bool:
    """A dict, a Mapping or a pydantic model: the result renders as one JSON object."""
    origin = get_origin(annotation) or annotation
    if origin in (dict, Mapping):
        return True
    return isinstance(origin, type) and issubclass(origin, BaseModel)


class Toolset:
    """A named group of tools. Toolsets combine (`Toolset.combine`) and filter (`only`)."""

    def __init__(self, name: str, tools: Iterable[Tool] = ()):
        self.name = name
        self._tools: dict[str, Tool] = {}
        # Bumped on every change, so whoever caches the schemas (the runtime) knows to rebuild
        # them: an MCP server's tools can change while the bot runs.
        self.version = 0
        for t in tools:
            self.add(t)

    def add(self, tool: Tool) -> Tool:
        if tool.name in self._tools:
            raise ValueError(f"tool {tool.name!r} registered twice")
        self._tools[tool.name] = tool
        self.version += 1
        return tool

    def remove(self, name: str) -> Tool | None:
        tool = self._tools.pop(name, None)
        if tool is not None:
            self.version += 1
        return tool

    @overload
    def tool(self, fn: F, /) -> F: ...

    @overload
    def tool(
        self,
        fn: None = None,
        /,
        *,
        name: str | None = None,
        description: str | None = None,
        concurrency_safe: bool = False,
        requires_approval: bool = False,
        background: bool = False,
        side_effect: SideEffect | None = None,
        timeout: float | None = None,
        open_world: bool = False,
        idempotent: bool = False,
    ) -> Callable[[F], F]: ...

    def tool(
        self,
        fn: F | None = None,
        /,
        *,
        name: str | None = None,
        description: str | None = None,
        concurrency_safe: bool = False,
        requires_approval: bool = False,
        background: bool = False,
        side_effect: SideEffect | None = None,
        timeout: float | None = None,
        open_world: bool = False,
        idempotent: bool = False,
    ) -> F | Callable[[F], F]:
        """Register a function as a tool; usable bare (`@ts.tool`) or with flags."""

        def register(f: F) -> F:
            effect: SideEffect = side_effect or ("mutating" if requires_approval else "read_only")
            self.add(
                build_tool(
                    f,
                    name=name,
                    description=description,
                    toolset=self.name,
                    concurrency_safe=concurrency_safe,
                    requires_approval=requires_approval,
                    background=background,
                    side_effect=effect,
                    timeout=timeout,
                    open_world=open_world,
                    idempotent=idempotent,
                )
            )
            return f

        return register(fn) if fn is not None else register

    # -- lookups ------------------------------------------------------------------------------
    def get(self, name: str) -> Tool:
        try:
            return self._tools[name]
        except KeyError:
            raise ToolNotFound(f"unknown tool: {name}") from None

    def __contains__(self, name: object) -> bool:
        return name in self._tools

    def __iter__(self) -> Iterator[Tool]:
        return iter(self._tools.values())

    def __len__(self) -> int:
        return len(self._tools)

    def specs(self) -> list[ToolSpec]:
        return [t.spec for t in self._tools.values()]

    def only(self, names: Iterable[str], name: str | None = None) -> Toolset:
        wanted = set(names)
        return Toolset(name or self.name, (t for t in self if t.name in wanted))

    def without(self, names: Iterable[str]) -> Toolset:
        drop = set(names)
        return Toolset(self.name, (t for t in self if t.name not in drop))

    @staticmethod
    def combine(name: str, *toolsets: Toolset) -> Toolset:
        combined = Toolset(name)
        for ts in toolsets:
            for t in ts:
                combined.add(t)
        return combined


def render_result(value: Any) -> str:
    """Turn a tool's return value into the text the model sees."""
    if isinstance(value, str):
        return value
    if isinstance(value, BaseModel):
        return value.model_dump_json()
    try:
        return json.dumps(value, ensure_ascii=False, default=str)
    except (TypeError, ValueError) as exc:  # pragma: no cover - defensive
        raise ToolFailed(f"tool returned an unserialisable value: {exc}") from exc
