"""An optional extra that the model SDKs import eagerly and tapebot never uses is skipped: their
aiohttp transport (agent/providers/sdkload.py). Each
probe runs in a fresh interpreter; behaviour is checked (what is imported, what still works),
never timings."""

from __future__ import annotations

from tests.perf.probe import probe


def test_the_sdk_client_is_built_without_aiohttp_which_stays_importable():
    seen = probe(
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


def test_nothing_is_hidden_when_the_library_is_already_loaded():
    seen = probe(
        """
        import json, sys
        import openai  # the ordinary way: aiohttp comes along
        from agent.providers.sdkload import import_sdk
        assert import_sdk("openai") is openai
        print(json.dumps({"aiohttp": "aiohttp" in sys.modules}))
        """
    )
    assert seen == {"aiohttp": True}


def test_a_library_that_needs_the_package_after_all_gets_it(tmp_path):
    (tmp_path / "needs_colorsys.py").write_text("import colorsys\nVALUE = colorsys.rgb_to_hsv(1, 0, 0)\n")
    seen = probe(
        """
        import json, sys
        from agent.providers.sdkload import import_without
        mod = import_without("needs_colorsys", ("colorsys",))
        print(json.dumps({"value": list(mod.VALUE), "colorsys": "colorsys" in sys.modules}))
        """,
        path=[tmp_path],
    )
    assert seen == {"value": [0.0, 1.0, 1.0], "colorsys": True}


def test_registering_the_market_tools_leaves_the_alert_store_unloaded():
    """A one-shot turn registers every market tool; the alert store and its ORM models (~50 ms of
    import) load with `manage_alerts`' first call, which then works as before."""
    seen = probe(
        """
        import json, sys
        import markets.tools
        from markets.toolset import market_tools
        names = {spec.name for spec in market_tools.specs()}
        before = sorted(m for m in ("markets.alerts", "markets.models") if m in sys.modules)
        from markets.alerts import AlertSpec  # what the tool imports when called
        print(json.dumps({"registered": "manage_alerts" in names, "loaded": before,
                          "spec": AlertSpec("close_above", 1.0).check().kind}))
        """
    )
    assert seen == {"registered": True, "loaded": [], "spec": "close_above"}


def test_the_intraday_poll_module_leaves_numpy_unloaded_until_a_poll():
    """`tapebot run` imports the poll to ask whether it polls at all; numpy (and the BLAS threads
    that spin after its import, while the chats open) loads with the first poll's check."""
    seen = probe(
        """
        import json, sys
        import bot.alert_poll
        before = "numpy" in sys.modules
        from markets.alerts_live import evaluate_live  # what a poll imports when it runs
        print(json.dumps({"numpy_before": before, "numpy_after": "numpy" in sys.modules}))
        """
    )
    assert seen == {"numpy_before": False, "numpy_after": True}
