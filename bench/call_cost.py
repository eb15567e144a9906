"""What one model call sends: tool schemas vs everything else, for the README's cost paragraph.

    python -m bench.call_cost

The real composition root (`bot.app.App`, the full tool set, memory on) answers "hi" through the
real Anthropic and OpenAI clients against the scripted LLM server (tests/fakes/llm_server.py); we
take the request body the endpoint received and count its parts with `agent.tokens` (an estimate
made never to under-count; real tokenizers give a few percent less) and, where the test-only
`bpe-openai` package is installed, with the o200k tokenizer. Prints figures; asserts nothing.
"""

from __future__ import annotations

import asyncio
import json
import logging
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from agent.approval import Requester
from agent.runtime import TurnRequest
from agent.tokens import estimate_tokens
from bot.app import App
from config.loader import load_settings
from tests.fakes.llm_server import Reply, ScriptedLLMServer


def _o200k() -> Any:
    try:
        import bpe_openai  # type: ignore[import-not-found]

        return bpe_openai.get_encoding("o200k_base")
    except Exception:
        return None


async def one_call(provider: str) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp:
        home = Path(tmp) / "home"
        home.mkdir()
        async with ScriptedLLMServer() as server:
            server.script(Reply("Hello."))
            (home / "config.toml").write_text(
                f"""
[[models]]
id = "main"
provider = "{provider}"
model = "{"claude-sonnet-4-5" if provider == "anthropic" else "gpt-4o"}"
base_url = "{server.base_url(provider)}"
api_key = "test-key"

[scheduler]
enabled = false
""",
                encoding="utf-8",
            )
            settings = load_settings(home, {"TAPEBOT_HOME": str(home)})
            app = App(settings)
            await app.start(adapters=False)
            try:
                who = Requester("u1", "s1", ("u1",))
                request = TurnRequest("s1", "hi", who, system_dynamic=app.system_dynamic())
                async for _event in app.runtime.run(request):
                    pass
            finally:
                await app.stop()
            body = next(r.body for r in server.requests if r.model.startswith(("claude", "gpt-4o")))
    return body


def parts(body: dict[str, Any]) -> dict[str, str]:
    tools = json.dumps(body.get("tools", []), ensure_ascii=False)
    rest = {k: v for k, v in body.items() if k != "tools"}
    return {"tool schemas": tools, "everything else": json.dumps(rest, ensure_ascii=False)}


async def main() -> None:
    logging.basicConfig(level=logging.ERROR)
    enc = _o200k()
    print("one model call answering 'hi' (first call of a new chat; memory on, all tools)")
    for provider in ("anthropic", "openai"):
        body = await one_call(provider)
        counted = parts(body)
        n_tools = len(body.get("tools", []))
        total = sum(estimate_tokens(t) for t in counted.values())
        print(f"\n{provider}: {n_tools} tools")
        for name, text in counted.items():
            est = estimate_tokens(text)
            real = f", o200k {len(enc.encode(text)):,}" if enc is not None else ""
            print(f"  {name:<16} ≈{est:>6,} tokens ({est / total:.0%}){real}")
        real_total = (
            f", o200k {sum(len(enc.encode(t)) for t in counted.values()):,}" if enc is not None else ""
        )
        print(f"  {'total':<16} ≈{total:>6,} tokens{real_total}")


if __name__ == "__main__":
    asyncio.run(main())
