"""The outside world of a tapebot container, for `deploy/smoke`: the fake Telegram Bot API and the
scripted LLM server (OpenAI wire protocol) on this host's loopback, and a user who talks to the bot.

    python -m tests.fakes.smoke_peers --urls FILE --result FILE [--exec] [--timeout S]

Both listen on every interface (a container on a bridge network reaches them at the host's
address). Writes {"telegram": <api_base_url>, "openai": <base_url>, "telegram_port": …,
"openai_port": …, "token": <bot token>} to --urls once both listen, then waits for the bot to poll, sends "hi" and waits for the model's answer; with --exec
it also asks for a shell command, taps Approve on the card, and waits for the command's output to
come back (the model quotes the tool result). Then writes "ok" (or why not) to --result and keeps
serving (for `tapebot doctor` and `tapebot chat -m`) until SIGTERM.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import signal
from pathlib import Path
from typing import Any

from tests.fakes.llm_server import Reply, ScriptedLLMServer, ToolCall
from tests.fakes.telegram_api import FakeBotAPI, buttons_of

TOKEN = "123456:SMOKE-token-abcdef"
USER = 1001
HELLO = "smoke: hello from the scripted model"
EXEC_ASK = "run the sandbox check"
# In the sandbox TAPEBOT_HOME is hidden: the database must not be visible to the command.
EXEC_COMMAND = "echo sandbox-ok; test -e /data/tapebot.db && echo db-visible || echo db-hidden"
EXEC_SAID = "the command printed:"


def _answer(body: dict[str, Any]) -> Reply:
    """One model reply for any request (doctor's probe, a chat turn, a tool round)."""
    messages = body.get("messages") or []
    last = messages[-1] if messages else {}
    if last.get("role") == "tool":
        return Reply(text=f"{EXEC_SAID} {' '.join(str(last.get('content', '')).split())}")
    content = last.get("content")
    text = content if isinstance(content, str) else json.dumps(content)
    if EXEC_ASK in text:
        return Reply(tool_calls=[ToolCall("exec_command", {"command": EXEC_COMMAND})])
    return Reply(text=HELLO)


async def _main(urls: Path, result: Path, with_exec: bool, timeout: float) -> int:
    api = FakeBotAPI(token=TOKEN)
    await api.serve(host="0.0.0.0")
    llm = ScriptedLLMServer(host="0.0.0.0")
    llm.default = _answer
    await llm.start()
    urls.write_text(
        json.dumps(
            {
                "telegram": api.base_url,
                "openai": f"http://127.0.0.1:{llm.port}/v1",
                "telegram_port": api.port,
                "openai_port": llm.port,
                "token": TOKEN,
            }
        )
    )
    stop = asyncio.Event()
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
    try:
        outcome = await _talk(api, with_exec, timeout)
        result.write_text(outcome)
        await stop.wait()
    finally:
        await llm.close()
        await api.close()
    return 0 if outcome == "ok" else 1


async def _talk(api: FakeBotAPI, with_exec: bool, timeout: float) -> str:
    """What a user does; "ok", or what did not happen."""
    step = "the bot polling Telegram"
    try:
        await api.wait_for(lambda: api.calls_to("getUpdates"), timeout=timeout)
        step = "the answer to 'hi'"
        api.push_text(USER, "hi", user_id=USER)
        await api.wait_for(lambda: any(HELLO in t for t in api.texts(USER)), timeout=timeout)
        print("peers: Telegram round trip answered by the scripted model", flush=True)
        if with_exec:
            step = "the exec_command approval card"
            api.push_text(USER, EXEC_ASK, user_id=USER)
            card = await api.wait_for(
                lambda: next(
                    (
                        m
                        for m in api.sent(USER)
                        if any(b["callback_data"].startswith("o:") for b in buttons_of(m))
                    ),
                    None,
                ),
                timeout=timeout,
            )
            approve = next(
                b["callback_data"] for b in buttons_of(card) if b["callback_data"].startswith("o:")
            )
            api.push_callback(USER, card["message_id"], approve, user_id=USER)
            step = "the command's output"
            said = await api.wait_for(
                lambda: next((t for t in api.texts(USER) if EXEC_SAID in t), None), timeout=timeout
            )
            print(f"peers: exec_command approved and run: {said}", flush=True)
            if "sandbox-ok" not in said or "db-hidden" not in said:
                return f"the command did not run sandboxed: {said}"
    except AssertionError:  # FakeBotAPI.wait_for's timeout
        return f"no {step} within {timeout:.0f} s; the chat shows: {api.texts(USER)}"
    return "ok"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--urls", type=Path, required=True)
    parser.add_argument("--result", type=Path, required=True)
    parser.add_argument("--exec", action="store_true", dest="with_exec")
    parser.add_argument("--timeout", type=float, default=180.0)
    args = parser.parse_args()
    return asyncio.run(_main(args.urls, args.result, args.with_exec, args.timeout))


if __name__ == "__main__":
    raise SystemExit(main())
