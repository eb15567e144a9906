"""The one way anything reaches a tool over MCP: tools/call, resources/read and completions all
call `ToolGate.invoke`, so every call is write-gated, idempotent (a client's `idempotency_key`
is honoured as sent, across processes and restarts) and audited the same way — a log line and a
JSON line in `$TAPEBOT_HOME/results/mcp_audit.jsonl`, cancelled calls included."""

from __future__ import annotations

import asyncio
import json
import logging
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agent.errors import InvalidToolArguments, ToolError
from agent.ports import args_hash
from agent.tools.registry import Deps, Tool, ToolContext, ToolOutput, ToolSpec

log = logging.getLogger("tapebot.mcp")

IDEMPOTENCY_ARG = "idempotency_key"


def is_write(spec: ToolSpec) -> bool:
    return spec.requires_approval or spec.side_effect == "mutating"


@dataclass
class McpAudit:
    """Every MCP call: a log line, an in-memory list (tests, `tapebot mcp`), a JSONL file."""

    path: Path | None = None
    entries: list[dict[str, Any]] = field(default_factory=list)

    def record(self, entry: dict[str, Any]) -> None:
        self.entries.append(entry)
        level = logging.WARNING if entry.get("write") else logging.INFO
        log.log(
            level,
            "mcp call %s key=%s ok=%s%s",
            entry["tool"],
            entry["key"],
            entry["ok"],
            f" error={entry['error']}" if entry.get("error") else "",
        )
        if self.path is not None:
            try:
                self.path.parent.mkdir(parents=True, exist_ok=True)
                with self.path.open("a", encoding="utf-8") as f:
                    f.write(json.dumps(entry, ensure_ascii=False, default=str) + "\n")
            except OSError:
                log.exception("cannot write the MCP audit file %s", self.path)


def coerce_arguments(spec: ToolSpec, args: dict[str, Any]) -> dict[str, Any]:
    """Numbers where the schema asks for a string become that string: MCP clients that parse
    `code=600519` from a command line send a number (leading zeros never survive as one, so
    `str()` is exact)."""
    props = spec.parameters.get("properties") or {}
    out = dict(args)
    for name, value in args.items():
        if isinstance(value, bool) or not isinstance(value, int | float):
            continue
        prop = props.get(name) or {}
        types_ = {prop.get("type")} | {alt.get("type") for alt in prop.get("anyOf", ())}
        if "string" in types_ and not types_ & {"integer", "number"}:
            out[name] = str(int(value)) if isinstance(value, float) and value.is_integer() else str(value)
    return out


class CallFailed(Exception):
    """A served tool's call ended in an error the client should read (already audited)."""


@dataclass
class Outcome:
    """What one served call produced: the value as the tool returned it, and its attachments."""

    value: Any
    attachments: list[Any]


@dataclass
class ToolGate:
    """The one way anything reaches a tool over MCP: tools/call, resources/read and completions
    all go through `invoke`, so every call is tier-filtered, write-gated, idempotent and audited
    the same way."""

    exposed: dict[str, Tool]
    hidden_writes: set[str]
    deps: Deps
    audit: McpAudit
    instance: str
    user_id: str
    workspace: Path | None
    default_timeout: float
    # write tools not served, whose read actions back resources (manage_alerts' "list")
    readable: dict[str, Tool] = field(default_factory=dict)

    def refusal(self, name: str) -> str:
        if name in self.hidden_writes:
            return (
                f"{name} changes data and is not exposed over MCP. The operator can enable write "
                "tools by starting the server with `tapebot mcp --allow-writes`."
            )
        return f"unknown tool {name}; available: {', '.join(self.exposed) or 'none'}"

    async def invoke(
        self,
        name: str,
        args: dict[str, Any],
        *,
        request_id: Any,
        progress: Any = None,
        read_action: bool = False,
    ) -> Outcome:
        """Run a served tool; `read_action`: a resource's read of a write tool that is not served
        (its arguments name a read action, fixed by the resource, never the client's)."""
        started = time.perf_counter()
        tool = self.exposed.get(name) or (self.readable[name] if read_action else self.exposed[name])
        args = coerce_arguments(tool.spec, args)
        write = is_write(tool.spec)
        client_key = str(args.pop(IDEMPOTENCY_ARG, "") or "") if write else ""
        # Client keys get their own prefix so they can never collide with a chat call id.
        key = f"mcp-key-{client_key}" if client_key else f"mcp-{self.instance}-{request_id}"

        async def no_progress(stage: str, detail: str = "", percent: float | None = None) -> None:
            return None

        ctx = ToolContext(
            call_id=key,
            tool_name=name,
            session_id=f"mcp:{self.instance}",
            turn_id=f"mcp:{self.instance}",
            user_id=self.user_id,
            chat_key="mcp",
            workspace=self.workspace or Path.cwd(),
            deps=self.deps,
            unattended=False,  # a person is at the MCP client, which confirms writes itself
            source="mcp",
            # honoured as the client sent it: no per-process part, so it holds across restarts
            idempotency_key=client_key,
            _progress=progress or no_progress,
        )

        def failed(message: str) -> CallFailed:
            self.audit.record(entry(name, key, args, False, message, started, write=write))
            return CallFailed(message)

        timeout = tool.spec.timeout or self.default_timeout
        try:
            tool.validate(args)
            value = await asyncio.wait_for(tool.call(ctx, args), timeout)
        except InvalidToolArguments as exc:
            raise failed(str(exc)) from exc
        except TimeoutError as exc:
            raise failed(f"{name} did not finish within {timeout:.0f} s") from exc
        except ToolError as exc:
            raise failed(str(exc)) from exc
        except asyncio.CancelledError:  # the client cancelled the request: audited all the same
            self.audit.record(entry(name, key, args, False, "cancelled by the client", started, write=write))
            raise
        except Exception as exc:  # the tool crashed: an error result, never a dead server
            log.exception("MCP tool %s failed", name)
            raise failed(f"{name} failed: {type(exc).__name__}: {exc}") from exc
        self.audit.record(entry(name, key, args, True, "", started, write=write))
        if isinstance(value, ToolOutput):
            return Outcome(value.content, list(value.attachments))
        return Outcome(value, [])


def entry(
    tool: str, key: str, args: dict[str, Any], ok: bool, error: str, started: float, *, write: bool
) -> dict[str, Any]:
    return {
        "ts": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "tool": tool,
        "key": key,
        "write": write,
        "args_hash": args_hash(tool, args),
        "arguments": json.loads(json.dumps(args, default=str))
        if len(json.dumps(args, default=str)) <= 4000
        else "(too long)",
        "ok": ok,
        "error": error[:500],
        "elapsed": round(time.perf_counter() - started, 3),
    }
