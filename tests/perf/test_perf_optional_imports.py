"""Optional extras that libraries import eagerly and tapebot never uses are skipped:
the SDKs' aiohttp transport, httpx's CLI, python-telegram-bot's Passport crypto and tornado. Each
probe runs in a fresh interpreter; behaviour is checked (what is imported, what still works),
never timings."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _probe(code: str, extra_path: Path | None = None) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    env["PYTHONPATH"] = os.pathsep.join(str(p) for p in (ROOT, extra_path) if p)
    out = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_the_sdk_client_is_built_without_aiohttp_which_stays_importable():
    seen = _probe(
        """
        import json, sys
        from agent.providers import build_model_client
        from types import SimpleNamespace as M
        cfg = M(id="m", provider="openai", model="gpt-x", base_url="http://127.0.0.1:9/v1", api_key="sk-x")
        client = build_model_client(cfg)
        client.warm()  # builds the SDK client and loads its chat resource, as the start-up does
        before = "aiohttp" in sys.modules
        import aiohttp  # anything that needs it later gets it as usual
        print(json.dumps({"aiohttp_before": before, "built": client._sdk_client is not None,
                          "resource": "openai.resources.chat.completions.completions" in sys.modules,
                          "aiohttp_after": hasattr(aiohttp, "ClientSession")}))
        """
    )
    assert seen == {"aiohttp_before": False, "built": True, "resource": True, "aiohttp_after": True}


def test_telegram_loads_without_passport_crypto_tornado_or_the_httpx_cli():
    # what this venv has of them (a clean install has no tornado): each stays importable afterwards
    installed = [m for m in ("cryptography", "tornado", "click") if importlib.util.find_spec(m)]
    seen = _probe(
        f"""
        import importlib, json, sys
        from config.imports import import_telegram
        ext = import_telegram()
        from telegram.ext import Application, BaseRateLimiter  # what the adapter uses
        skipped = {{m: m in sys.modules for m in ("cryptography", "tornado", "click", "rich", "pygments")}}
        for name in {installed!r}:
            importlib.import_module(name)
        print(json.dumps({{**skipped, "app": Application.__name__}}))
        """
    )
    assert seen == {
        "cryptography": False,
        "tornado": False,
        "click": False,
        "rich": False,
        "pygments": False,
        "app": "Application",
    }


def test_nothing_is_hidden_when_the_library_is_already_loaded():
    seen = _probe(
        """
        import json, sys
        import httpx  # the ordinary way: its CLI comes along
        from config.imports import import_httpx
        assert import_httpx() is httpx
        print(json.dumps({"click": "click" in sys.modules}))
        """
    )
    assert seen == {"click": True}


def test_a_library_that_needs_the_package_after_all_gets_it(tmp_path):
    (tmp_path / "needs_colorsys.py").write_text("import colorsys\nVALUE = colorsys.rgb_to_hsv(1, 0, 0)\n")
    seen = _probe(
        """
        import json, sys
        from config.imports import import_without
        mod = import_without("needs_colorsys", ("colorsys",))
        print(json.dumps({"value": list(mod.VALUE), "colorsys": "colorsys" in sys.modules}))
        """,
        extra_path=tmp_path,
    )
    assert seen == {"value": [0.0, 1.0, 1.0], "colorsys": True}
