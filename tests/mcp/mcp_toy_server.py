"""A small MCP server for the client tests, speaking real MCP over stdio (or streamable HTTP).

python mcp_toy_server.py            normal: echo, add, write_note, picture, fail, slow, env, big, die
python mcp_toy_server.py hang       reads requests and never answers
python mcp_toy_server.py crash      writes an error to stderr and exits at start
"""

from __future__ import annotations

import base64
import json
import os
import sys

import anyio
import mcp_types as types
from mcp.server.lowlevel import NotificationOptions, Server
from mcp.server.stdio import stdio_server
from mcp.server.subscriptions import InMemorySubscriptionBus, ListenHandler
from mcp.shared.exceptions import MCPError
from mcp.shared.subscriptions import ToolsListChanged

PNG = base64.b64encode(
    bytes.fromhex(
        "89504e470d0a1a0a0000000d4948445200000001000000010806000000"
        "1f15c4890000000d49444154789c6360000002000154a24f5d0000000049454e44ae426082"
    )
).decode()

OBJECT = {"type": "object", "properties": {}}
TOOLS = [
    types.Tool(
        name="echo",
        description="Echo the text back.",
        input_schema={"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]},
        annotations=types.ToolAnnotations(read_only_hint=True),
    ),
    types.Tool(
        name="add",
        description="Add two integers.",
        input_schema={
            "type": "object",
            "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
            "required": ["a", "b"],
        },
        annotations=types.ToolAnnotations(read_only_hint=True, idempotent_hint=True),
    ),
    types.Tool(name="write.note", description="Write a note (changes things).", input_schema=OBJECT),
    types.Tool(name="picture", description="A 1x1 PNG.", input_schema=OBJECT),
    types.Tool(name="fail", description="Always fails.", input_schema=OBJECT),
    types.Tool(name="slow", description="Never finishes.", input_schema=OBJECT),
    types.Tool(name="env", description="The environment variable names.", input_schema=OBJECT),
    types.Tool(name="big", description="A lot of text.", input_schema=OBJECT),
    types.Tool(name="die", description="Crash the server.", input_schema=OBJECT),
    types.Tool(
        name="grow", description="Add the tool 'extra' and say the list changed.", input_schema=OBJECT
    ),
    types.Tool(
        name="survey",
        description="Ask the user which account, how many, and to confirm.",
        input_schema=OBJECT,
    ),
]
SURVEY = {
    "type": "object",
    "properties": {
        "account": {"type": "string", "title": "Account", "enum": ["paper", "live"]},
        "lots": {"type": "integer", "title": "Lots", "description": "how many lots"},
        "confirm": {"type": "boolean", "title": "Confirm"},
    },
    "required": ["account", "lots", "confirm"],
}
EXTRA = types.Tool(name="extra", description="Added while running.", input_schema=OBJECT)


def text(value: str, **kw) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(type="text", text=value)], **kw)


async def list_tools(ctx, params):
    return types.ListToolsResult(tools=TOOLS)


async def call_tool(ctx, params):
    args = params.arguments or {}
    name = params.name
    if name == "echo":
        return text(args["text"])
    if name == "add":
        return types.CallToolResult(
            content=[types.TextContent(type="text", text=str(args["a"] + args["b"]))],
            structured_content={"result": args["a"] + args["b"]},
        )
    if name == "write.note":
        return text("noted")
    if name == "picture":
        return types.CallToolResult(
            content=[
                types.TextContent(type="text", text="here it is"),
                types.ImageContent(type="image", data=PNG, mime_type="image/png"),
            ]
        )
    if name == "fail":
        return text("the upstream API said no", is_error=True)
    if name == "slow":
        await anyio.sleep(3600)
    if name == "env":
        return text(",".join(sorted(os.environ)))
    if name == "big":
        return text("b" * 50_000)
    if name == "die":
        os._exit(3)
    if name == "grow":
        TOOLS.append(EXTRA)
        TOOLS.remove(next(t for t in TOOLS if t.name == "big"))
        # both eras: the 2025 notification, and the event a 2026 client's listen stream carries
        await ctx.session.send_tool_list_changed()
        await BUS.publish(ToolsListChanged())
        return text("grown")
    if name == "extra":
        return text("extra ran")
    if name == "survey":
        # 2026 era: the question rides on an input-required result and comes back on the retry;
        # 2025 era: the server asks over the session's back-channel
        answered = (getattr(params, "input_responses", None) or {}).get("form")
        if answered is None:
            try:
                answered = await ctx.session.elicit_form("Set up the order", SURVEY)
            except MCPError:  # no back-channel: the 2026 way
                form = types.ElicitRequestFormParams(message="Set up the order", requested_schema=SURVEY)
                return types.InputRequiredResult(input_requests={"form": types.ElicitRequest(params=form)})
        content = getattr(answered, "content", None)
        action = getattr(answered, "action", None)
        if action is None and isinstance(answered, dict):
            action, content = answered.get("action"), answered.get("content")
        return text(json.dumps({"action": action, "content": content}, sort_keys=True))
    return text(f"unknown tool {name}", is_error=True)


BUS = InMemorySubscriptionBus()
server = Server(
    "toy", on_list_tools=list_tools, on_call_tool=call_tool, on_subscriptions_listen=ListenHandler(BUS)
)


async def main() -> None:
    async with stdio_server() as (read, write):
        options = server.create_initialization_options(NotificationOptions(tools_changed=True))
        await server.run(read, write, options)


if __name__ == "__main__":
    mode = sys.argv[1] if len(sys.argv) > 1 else "normal"
    if mode == "hang":
        for _line in sys.stdin:  # read requests, never answer; exit when stdin closes
            pass
    elif mode == "crash":
        print("toy: missing TOY_API_KEY, cannot start", file=sys.stderr, flush=True)
        sys.exit(2)
    else:
        anyio.run(main)
