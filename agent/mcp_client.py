"""MCP servers as tapebot tools: `[[mcp_servers]]` in config.toml.

    [[mcp_servers]]
    name = "files"
    command = ["npx", "-y", "@modelcontextprotocol/server-filesystem", "/srv/notes"]
    env_allowlist = ["HOME"]          # the server sees these variables and PATH, nothing else
    requires_approval = true          # the default: every call waits for the user's tap
    tool_overrides = { read_file = false }   # per tool: false = no approval needed
    timeout = 30                      # seconds, for connecting and for each call

    [[mcp_servers]]
    name = "search"
    url = "https://mcp.example.com/mcp"      # streamable HTTP
    bearer_token_env = "SEARCH_MCP_TOKEN"    # sends "Authorization: Bearer $SEARCH_MCP_TOKEN"
    headers = { "X-Client" = "tapebot" }     # plain headers; secret ones: headers_env = { "X-Api-Key" = "VAR" }

`McpManager(configs).start()` connects to every server concurrently with the official `mcp`
SDK, lists their tools and wraps each as a tapebot tool named `server__tool` whose parameters are
the server's JSON schema. A server that fails to start, crashes or hangs is reported by
`status()` (shown in /status) and never stops the bot; a call to a server that went away is a
tool error the model can read. Each connection lives in its own task (the SDK's task groups must
be entered and left by the same task); calls are made from the turn's task.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import hashlib
import json
import logging
import os
import re
import shutil
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, TextIO

from agent.errors import InvalidToolArguments, ToolFailed, ToolTimedOut
from agent.texts import Text
from agent.texts import words as texts_in
from agent.tools.registry import Attachment, Tool, ToolContext, ToolOutput, Toolset, ToolSpec
from config.settings import McpServerConfig

if TYPE_CHECKING:  # the SDK is imported when a server starts, not with this module
    from mcp import Client, StdioServerParameters
    from mcp.types import CallToolResult, ImageContent
    from mcp.types import Tool as RemoteTool

log = logging.getLogger(__name__)

NAME_LIMIT = 64  # Anthropic and OpenAI tool-name limit
OUTPUT_CAP = 20_000  # characters of text a server may return per call
DESCRIPTION_CAP = 1_500
STDERR_TAIL = 300
REQUEST_TIMEOUT = -32001  # JSON-RPC error code the SDK uses for a request that timed out
_UNSAFE = re.compile(r"[^a-zA-Z0-9_-]+")

State = Literal["starting", "ready", "failed", "disconnected", "stopped"]

# a server's /status line in the chat's language (agent sits below bot/, so the words are here);
# the error detail after the state stays as the server or the SDK said it
MCP_WORDS: dict[str, Text] = {
    "ready": Text(
        en="{name}: ready, {n} tool(s) ({transport})",
        zh="{name}：就绪，{n} 个工具（{transport}）",
    ),
    "state": Text(
        en="{name}: {state}{detail}{again}",
        zh="{name}：{state}{detail}{again}",
    ),
    "detail": Text(
        en=": {error}",
        zh="：{error}",
    ),
    "reconnecting": Text(
        en="; reconnecting",
        zh="；正在重连",
    ),
    "starting": Text(
        en="starting",
        zh="启动中",
    ),
    "failed": Text(
        en="failed",
        zh="失败",
    ),
    "disconnected": Text(
        en="disconnected",
        zh="已断开",
    ),
    "stopped": Text(
        en="stopped",
        zh="已停止",
    ),
}


def _clean(text: str) -> str:
    return _UNSAFE.sub("_", text).strip("_") or "x"


def namespaced(server: str, tool: str) -> str:
    """`server__tool`, made of the characters every provider accepts, at most 64 long."""
    name = f"{_clean(server)}__{_clean(tool)}"
    if len(name) <= NAME_LIMIT:
        return name
    digest = hashlib.sha1(name.encode()).hexdigest()[:6]
    return name[: NAME_LIMIT - 7] + "_" + digest


def _root_error(exc: BaseException) -> BaseException:
    """The first leaf of an exception group (the SDK wraps errors in task-group groups)."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return exc


def _describe(exc: BaseException) -> str:
    exc = _root_error(exc)
    text = " ".join(str(exc).split())
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def server_environment(config: McpServerConfig, environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """The whole environment a stdio server gets: the allow-listed variables and PATH."""
    environ = os.environ if environ is None else environ
    env = {k: environ[k] for k in config.env_allowlist if k in environ}
    env["PATH"] = environ.get("PATH", os.defpath)
    return env


def stdio_parameters(
    config: McpServerConfig, environ: Mapping[str, str] | None = None
) -> StdioServerParameters:
    """StdioServerParameters that start the server with ONLY `server_environment()`. The SDK
    always merges a few variables of ours (HOME, USER, SHELL, ...) into the child's environment,
    so on POSIX the command runs through `env -u NAME ...` to drop the ones not allow-listed
    (names only on that command line, never values)."""
    from mcp import StdioServerParameters
    from mcp.client.stdio import DEFAULT_INHERITED_ENV_VARS

    assert config.command, "a stdio server needs a command"
    env = server_environment(config, environ)
    command, args = config.command[0], list(config.command[1:])
    env_bin = shutil.which("env") if os.name == "posix" else None
    drop = [k for k in DEFAULT_INHERITED_ENV_VARS if k not in env]
    if env_bin and drop:
        unset = [a for k in drop for a in ("-u", k)]
        command, args = env_bin, [*unset, "--", config.command[0], *config.command[1:]]
    return StdioServerParameters(command=command, args=args, env=env)


@contextlib.asynccontextmanager
async def _http_transport(url: str, headers: dict[str, str]) -> Any:
    """The SDK's streamable-HTTP transport over an HTTP client that sends `headers` (the SDK's
    own client sends none), closed with the session. Timeouts as the SDK's default client."""
    import httpx2
    from mcp.client.streamable_http import streamable_http_client

    timeout = httpx2.Timeout(30.0, read=300.0)

    async def refused(response: Any) -> None:
        # The SDK reports any 4xx as "Server returned an error response"; say which, for /status.
        if response.status_code in (401, 403):
            raise PermissionError(
                f"HTTP {response.status_code}: the server refused the credentials sent "
                "(check bearer_token_env / headers_env and that the variable is set)"
            )

    async with (
        httpx2.AsyncClient(headers=headers, timeout=timeout, event_hooks={"response": [refused]}) as http,
        streamable_http_client(url, http_client=http) as streams,
    ):
        yield streams


# ---- the tool adapter -------------------------------------------------------------------------
def _validator(schema: dict[str, Any]) -> Any:
    try:
        import jsonschema
    except ImportError:  # pragma: no cover - mcp depends on jsonschema
        return None
    try:
        cls = jsonschema.validators.validator_for(schema)
        cls.check_schema(schema)
        return cls(schema)
    except Exception:  # noqa: BLE001 — a server's broken schema: fall back to the required-keys check
        return None


class McpTool(Tool):
    """One remote tool, shaped like `agent.tools.registry.Tool` (spec, name, validate, call)."""

    def __init__(self, connection: McpServerConnection, remote_name: str, spec: ToolSpec):
        # Not calling Tool.__init__: there is no Python function behind this tool.
        self.connection = connection
        self.remote_name = remote_name
        self.spec = spec
        self.ctx_param = None
        self.is_async = True
        self._validator = _validator(spec.parameters)

    def validate(self, arguments: dict[str, Any] | None) -> dict[str, Any]:
        if arguments is None or not isinstance(arguments, dict):
            raise InvalidToolArguments("arguments are not a valid JSON object")
        if self._validator is not None:
            errors = sorted(self._validator.iter_errors(arguments), key=lambda e: list(e.path))
            if errors:
                problems = "; ".join(
                    f"{'.'.join(str(p) for p in e.path) or '(root)'}: {e.message}" for e in errors[:6]
                )
                raise InvalidToolArguments(f"invalid arguments for {self.name}: {problems}")
        else:
            missing = [k for k in self.spec.parameters.get("required", []) if k not in arguments]
            if missing:
                raise InvalidToolArguments(f"invalid arguments for {self.name}: missing {', '.join(missing)}")
        return dict(arguments)

    async def call(self, ctx: ToolContext, arguments: dict[str, Any] | None) -> Any:
        args = self.validate(arguments)
        return await self.connection.call(self.remote_name, args, ctx)


def _schema(raw: Any) -> dict[str, Any]:
    schema = dict(raw) if isinstance(raw, dict) else {}
    if schema.get("type") != "object":
        schema = {"type": "object", "properties": {}, **{k: v for k, v in schema.items() if k != "type"}}
    schema.setdefault("properties", {})
    return schema


def build_spec(config: McpServerConfig, remote: RemoteTool) -> ToolSpec:
    """The tapebot spec for one listed MCP tool: namespaced, approval per config (the server's
    annotations are hints from a third party: they set the side-effect label, never approval)."""
    ann = getattr(remote, "annotations", None)
    read_only = bool(ann is not None and ann.read_only_hint)
    idempotent = bool(ann is not None and ann.idempotent_hint)
    name = namespaced(config.name, remote.name)
    overrides = config.tool_overrides
    approval = overrides.get(remote.name, overrides.get(name, config.requires_approval))
    desc = " ".join((remote.description or remote.name).split())
    description = f"[MCP server {config.name}] {desc}"
    if len(description) > DESCRIPTION_CAP:
        description = description[: DESCRIPTION_CAP - 1] + "…"
    return ToolSpec(
        name=name,
        description=description,
        parameters=_schema(remote.input_schema),
        concurrency_safe=read_only and not approval,
        requires_approval=approval,
        side_effect="read_only" if read_only else ("idempotent" if idempotent else "mutating"),
        timeout=config.timeout + 5,  # a backstop behind the connection's own timeout
        toolset="mcp",
        summary=description.split(". ")[0][:200],
    )


# ---- one server -------------------------------------------------------------------------------
@dataclass
class McpServerConnection:
    """A connection to one configured server, owned by its own task."""

    config: McpServerConfig
    environ: Mapping[str, str] | None = None
    log_dir: Path | None = None
    results_dir: Path | None = None
    output_cap: int = OUTPUT_CAP
    start_timeout: float | None = None  # connect + list tools; default: config.timeout
    # A server that was ready and went away is reconnected after 1, 2, 4 … 60 s (0 = never).
    reconnect_delay: float = 1.0
    max_reconnect_delay: float = 60.0
    state: State = "starting"
    error: str = ""
    tools: list[McpTool] = field(default_factory=list)
    reconnects: int = 0  # successful reconnections
    _client: Client | None = None
    _task: asyncio.Task[None] | None = None
    _ready: asyncio.Event = field(default_factory=asyncio.Event)
    _stop: asyncio.Event = field(default_factory=asyncio.Event)
    _session_over: asyncio.Event = field(default_factory=asyncio.Event)
    _was_ready: bool = False
    _errlog: TextIO | None = None
    # Set when the server's tool list changed and `tools` was re-read (the manager republishes).
    tools_changed: asyncio.Event = field(default_factory=asyncio.Event)
    _reloads: set[asyncio.Task[None]] = field(default_factory=set)
    # The calls in flight (a server's question during one is asked in that call's chat) and how
    # long questions have held them up (their answer time does not count against the timeout).
    _calls: list[ToolContext] = field(default_factory=list)
    _asking: int = 0

    @property
    def name(self) -> str:
        return self.config.name

    @property
    def log_path(self) -> Path | None:
        return self.log_dir / f"mcp-{_clean(self.name)}.log" if self.log_dir else None

    def _transport(self) -> Any:
        from mcp.client.stdio import stdio_client

        if self.config.url:
            headers = self.config.resolved_headers(self.environ if self.environ is not None else os.environ)
            return _http_transport(self.config.url, headers)
        # The server's stderr goes to a log file (its last lines explain a failed start).
        if self.log_path is not None:
            self.log_path.parent.mkdir(parents=True, exist_ok=True)
            self._errlog = open(self.log_path, "a", encoding="utf-8")  # noqa: SIM115 - closed in _run
        else:
            self._errlog = open(os.devnull, "w", encoding="utf-8")  # noqa: SIM115
        return stdio_client(stdio_parameters(self.config, self.environ), errlog=self._errlog)

    def _stderr_tail(self) -> str:
        path = self.log_path
        if path is None or not path.exists():
            return ""
        with contextlib.suppress(OSError):
            lines = [
                ln.strip()
                for ln in path.read_text(encoding="utf-8", errors="replace").splitlines()
                if ln.strip()
            ]
            if lines:
                return lines[-1][-STDERR_TAIL:]
        return ""

    async def start(self) -> None:
        """Connect and list tools within the start timeout; never raises for the server's faults."""
        limit = self.start_timeout or self.config.timeout
        self._task = asyncio.create_task(self._run(), name=f"mcp-{self.name}")
        waiter = asyncio.ensure_future(self._ready.wait())
        done, _ = await asyncio.wait({waiter, self._task}, timeout=limit, return_when=asyncio.FIRST_COMPLETED)
        waiter.cancel()
        if not done:
            self.state, self.error = "failed", f"not responding: no answer within {limit:.0f} s"
            await self.stop()
            self.state = "failed"  # stop() would say "stopped"; keep the reason

    async def _run(self) -> None:
        """Sessions, one after another: a server that was ready and went away is reconnected with
        backoff until `stop()`. Its tools stay registered (the toolset is fixed at start) and work
        again once it is back; a server that never started is not retried."""
        delay = self.reconnect_delay
        while True:
            became_ready = await self._session()
            if self._stop.is_set() or not self._was_ready or self.reconnect_delay <= 0:
                return
            delay = self.reconnect_delay if became_ready else min(delay * 2, self.max_reconnect_delay)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._stop.wait(), delay)
                return  # stopped while waiting

    async def _session(self) -> bool:
        """One connection, until it fails or ends; True if it got ready."""
        from mcp import Client

        self._session_over = asyncio.Event()
        became_ready = False
        try:
            async with Client(
                self._transport(),
                read_timeout_seconds=self.config.timeout,
                message_handler=self._on_message,
                elicitation_callback=self._on_elicit,
            ) as client:
                async with asyncio.timeout(self.start_timeout or self.config.timeout):
                    listed = await self._list_tools(client)
                if not self._was_ready:
                    self.tools = [
                        McpTool(self, remote.name, build_spec(self.config, remote)) for remote in listed
                    ]
                else:
                    self.reconnects += 1
                    log.info("MCP server %s: reconnected", self.name)
                self._client = client
                self.state, self.error = "ready", ""
                became_ready = self._was_ready = True
                self._ready.set()
                listening = asyncio.create_task(self._listen(client))
                try:
                    await self._session_over.wait()
                finally:
                    listening.cancel()
        except Exception as exc:  # noqa: BLE001 — any failure (ExceptionGroups included) is reported, never raised
            if became_ready:  # lost (unless call() already said how)
                if self.state != "disconnected":
                    self.state, self.error = "disconnected", _describe(exc)
            elif self._was_ready:
                self.state, self.error = "disconnected", "reconnect failed: " + _describe(exc)
            else:
                self.state, self.error = "failed", "failed to start: " + _describe(exc)
            tail = self._stderr_tail()
            if tail and "stderr:" not in self.error:
                self.error += f" (stderr: {tail})"
            log.warning("MCP server %s: %s", self.name, self.error)
        finally:
            self._client = None
            if self._errlog is not None:
                with contextlib.suppress(Exception):
                    self._errlog.close()
                self._errlog = None
        return became_ready

    async def _on_message(self, message: Any) -> None:
        """A 2025-era server says its tools changed with a notification."""
        import mcp_types as types

        if isinstance(message, types.ToolListChangedNotification) and self._client is not None:
            # not inside the SDK's reader task; kept so it is not collected while it runs
            task = asyncio.create_task(self._reload_tools(self._client))
            self._reloads.add(task)
            task.add_done_callback(self._reloads.discard)

    async def _on_elicit(self, context: Any, params: Any) -> Any:
        """The server asks the user something mid-call: asked in the chat of the call it came
        from (agent/elicit.py), declined when that cannot be told or nobody is there."""
        import mcp_types as types

        from agent.elicit import LiveQuestions, ask_form

        ctx = self._calls[-1] if len(self._calls) == 1 else None
        if getattr(params, "mode", "form") != "form" or ctx is None:
            log.info(
                "MCP server %s: question declined (%s)",
                self.name,
                "not one call" if ctx is None else "url mode",
            )
            return types.ElicitResult(action="decline")
        schema = params.requested_schema
        schema = (
            schema.model_dump(by_alias=True, exclude_none=True)
            if hasattr(schema, "model_dump")
            else dict(schema)
        )
        self._asking += 1
        try:
            answer = await ask_form(ctx.deps.maybe(LiveQuestions), ctx, self.name, params.message, schema)
        finally:
            self._asking -= 1
        log.info("MCP server %s asked the user; answer: %s", self.name, answer.action)
        return types.ElicitResult(action=answer.action, content=answer.content)  # type: ignore[arg-type]

    async def _listen(self, client: Client) -> None:
        """A 2026-era server says it on a subscriptions/listen stream; older ones do not have it."""
        from mcp.client.subscriptions import ListenNotSupportedError

        try:
            async with client.listen(tools_list_changed=True) as sub:
                async for _event in sub:
                    await self._reload_tools(client)
        except ListenNotSupportedError:
            return
        except Exception as exc:  # noqa: BLE001 — the listen stream is an extra; calls go on without it
            log.info("MCP server %s: no change notifications (%s)", self.name, _describe(exc))

    async def _reload_tools(self, client: Client) -> None:
        try:
            listed = await self._list_tools(client, cache_mode="bypass")
        except Exception as exc:  # noqa: BLE001 — keep the tools we have; the next change retries
            log.warning("MCP server %s: cannot re-read its tools: %s", self.name, _describe(exc))
            return
        self.tools = [McpTool(self, remote.name, build_spec(self.config, remote)) for remote in listed]
        log.info("MCP server %s: its tools changed (%d now)", self.name, len(self.tools))
        self.tools_changed.set()

    async def _list_tools(self, client: Client, cache_mode: Any = "use") -> list[RemoteTool]:
        tools: list[RemoteTool] = []
        cursor = None
        for _ in range(50):  # a paginator that never ends cannot hang the start
            page = await client.list_tools(cursor=cursor, cache_mode=cache_mode)
            tools.extend(page.tools)
            cursor = page.next_cursor
            if not cursor:
                break
        return tools

    async def stop(self) -> None:
        """Close the session (a ready server gets a clean shutdown; a stuck one is cancelled)."""
        self._stop.set()
        self._session_over.set()
        task = self._task
        if task is not None and not task.done():
            done: set[Any] = set()
            if self.state == "ready":
                done, _ = await asyncio.wait({task}, timeout=5.0)
            if not done:
                task.cancel()
                await asyncio.wait({task}, timeout=10.0)
        if self.state in ("ready", "starting"):
            self.state = "stopped"

    async def call(self, remote_name: str, arguments: dict[str, Any], ctx: ToolContext) -> Any:
        client = self._client
        if client is None or self.state != "ready":
            reason = self.error or self.state
            later = "; reconnecting, try again shortly" if self.state == "disconnected" else ""
            raise ToolFailed(
                f"MCP server {self.name} is not available ({reason}{later}); its tools cannot run now"
            )
        timeout = self.config.timeout
        self._calls.append(ctx)
        try:
            result = await self._call_within(client, remote_name, arguments, timeout)
        except TimeoutError:
            raise ToolTimedOut(
                f"MCP server {self.name} did not answer {remote_name} within {timeout:.0f} s"
            ) from None
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # noqa: BLE001 — any MCP/transport failure is classified here and re-raised as a tool error
            if getattr(_root_error(exc), "code", None) == REQUEST_TIMEOUT:
                raise ToolTimedOut(
                    f"MCP server {self.name} did not answer {remote_name} within {timeout:.0f} s"
                ) from None
            message = _describe(exc)
            if "Connection closed" in message or isinstance(_root_error(exc), (EOFError, BrokenPipeError)):
                self.state = "disconnected"
                self.error = "the server went away" + (
                    f" (stderr: {t})" if (t := self._stderr_tail()) else ""
                )
                self._session_over.set()  # the supervisor reconnects it
            raise ToolFailed(f"MCP server {self.name} failed on {remote_name}: {message}") from None
        finally:
            self._calls.remove(ctx)
        return self._convert(remote_name, result, ctx)

    async def _call_within(self, client: Client, name: str, arguments: dict[str, Any], timeout: float) -> Any:
        """The call, timed out after `timeout` seconds of the server's own time: while it waits on
        the user's answer to its question, the clock stands still."""
        from agent.elicit import ANSWER_TIMEOUT, MAX_FIELDS

        longest = timeout + 2 * MAX_FIELDS * ANSWER_TIMEOUT  # the SDK's own read timeout
        task = asyncio.ensure_future(client.call_tool(name, arguments, read_timeout_seconds=longest))
        loop = asyncio.get_running_loop()
        used, last = 0.0, loop.time()
        try:
            while True:
                done, _ = await asyncio.wait({task}, timeout=0.25)
                now = loop.time()
                if not self._asking:
                    used += now - last
                last = now
                if done:
                    return task.result()
                if used > timeout + 1:
                    raise TimeoutError
        finally:
            if not task.done():
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await task

    def _convert(self, remote_name: str, result: CallToolResult, ctx: ToolContext) -> str | ToolOutput:
        texts: list[str] = []
        attachments: list[Attachment] = []
        for item in result.content or []:
            # the SDK's content blocks are a union tagged by `type`: comparing it narrows the block
            if item.type == "text":
                texts.append(item.text)
            elif item.type == "image":
                saved = self._save_image(item, ctx)
                if saved is not None:
                    attachments.append(saved)
                    texts.append(f"[image sent to the chat: {saved.path.name}]")
                else:
                    texts.append(f"[image ({item.mime_type}) not shown]")
            elif item.type == "resource":
                res = item.resource
                text = getattr(res, "text", None)
                texts.append(text if text is not None else f"[binary resource {res.uri}]")
            elif item.type == "resource_link":
                texts.append(f"[resource: {item.uri}]")
            else:
                texts.append(f"[{getattr(item, 'type', '') or 'unknown'} content not shown]")
        if not texts and result.structured_content is not None:
            texts.append(json.dumps(result.structured_content, ensure_ascii=False, default=str))
        text = "\n".join(texts)
        if len(text) > self.output_cap:
            text = text[: self.output_cap] + f"\n…[output capped at {self.output_cap:,} characters]"
        if result.is_error:
            raise ToolFailed(f"{self.name}/{remote_name} returned an error: {text[:2000] or '(no details)'}")
        return ToolOutput(text, attachments) if attachments else text

    def _save_image(self, item: ImageContent, ctx: ToolContext) -> Attachment | None:
        if self.results_dir is None:
            return None
        ext = {"image/png": ".png", "image/jpeg": ".jpg", "image/gif": ".gif", "image/webp": ".webp"}.get(
            item.mime_type
        )
        if ext is None:
            return None
        try:
            data = base64.b64decode(item.data, validate=True)
        except ValueError:
            return None
        self.results_dir.mkdir(parents=True, exist_ok=True)
        path = self.results_dir / f"mcp_{_clean(self.name)}_{_clean(ctx.call_id or 'call')}_{len(data)}{ext}"
        path.write_bytes(data)
        return Attachment(path=path, mime=item.mime_type, caption="")

    def status_line(self, lang: str = "en") -> str:
        words = texts_in(MCP_WORDS, lang)
        transport = self.config.url or " ".join(self.config.command or [])
        if self.state == "ready":
            return words["ready"].format(name=self.name, n=len(self.tools), transport=transport)
        detail = words["detail"].format(error=self.error) if self.error else ""
        again = words["reconnecting"] if self.state == "disconnected" and self.reconnect_delay > 0 else ""
        return words["state"].format(name=self.name, state=words[self.state], detail=detail, again=again)


# ---- all servers ------------------------------------------------------------------------------
class McpManager:
    """Connects the configured MCP servers and exposes their tools as one Toolset ("mcp").

    Build the runtime's toolset after `start()` (the tool list is fixed then). `status()` gives
    one line per server for /status."""

    def __init__(
        self,
        configs: Iterable[McpServerConfig],
        *,
        environ: Mapping[str, str] | None = None,
        log_dir: Path | None = None,
        results_dir: Path | None = None,
        output_cap: int = OUTPUT_CAP,
        start_timeout: float | None = None,
        reconnect_delay: float = 1.0,
    ):
        self.connections = [
            McpServerConnection(
                config=c,
                environ=environ,
                log_dir=log_dir,
                results_dir=results_dir,
                output_cap=output_cap,
                start_timeout=start_timeout,
                reconnect_delay=reconnect_delay,
            )
            for c in configs
        ]
        self._toolset = Toolset("mcp")
        self._published: list[Toolset] = []
        self._watchers: list[asyncio.Task[None]] = []
        self.started = False

    async def start(self) -> None:
        """Connect every server concurrently; failures are recorded, never raised."""
        if self.started:
            return
        self.started = True
        await asyncio.gather(*(c.start() for c in self.connections))
        toolset = Toolset("mcp")
        for conn in self.connections:
            for tool in conn.tools:
                if tool.name in toolset:
                    log.warning("MCP tool name %s is used twice; the second one is skipped", tool.name)
                    continue
                toolset.add(tool)
        self._toolset = toolset
        self._watchers = [asyncio.create_task(self._republish(c)) for c in self.connections]

    def publish_into(self, toolset: Toolset) -> None:
        """Keep `toolset` (the runtime's, which holds these tools among others) up to date when
        a server's tool list changes."""
        self._published.append(toolset)

    async def _republish(self, conn: McpServerConnection) -> None:
        current = {t.name for t in conn.tools if t.name in self._toolset and self._toolset.get(t.name) is t}
        while True:
            await conn.tools_changed.wait()
            conn.tools_changed.clear()
            for target in (self._toolset, *self._published):
                for name in current:
                    target.remove(name)
            current = set()
            for tool in conn.tools:
                if tool.name in self._toolset or any(tool.name in t for t in self._published):
                    log.warning("MCP tool name %s is used twice; the second one is skipped", tool.name)
                    continue
                for target in (self._toolset, *self._published):
                    target.add(tool)
                current.add(tool.name)

    async def stop(self) -> None:
        for watcher in self._watchers:
            watcher.cancel()
        await asyncio.gather(*(c.stop() for c in self.connections), return_exceptions=True)

    @property
    def toolset(self) -> Toolset:
        return self._toolset

    def status(self, lang: str = "en") -> list[str]:
        return [c.status_line(lang) for c in self.connections]

    async def __aenter__(self) -> McpManager:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()


__all__ = [
    "McpManager",
    "McpServerConnection",
    "McpTool",
    "build_spec",
    "namespaced",
    "server_environment",
    "stdio_parameters",
]
