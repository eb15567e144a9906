"""`tapebot chat` end to end: the real CLI in a subprocess, the real SDKs against the scripted
LLM server, a real SQLite database under a temporary TAPEBOT_HOME."""

from __future__ import annotations

import json
from pathlib import Path

from tests.fakes.cli_kit import SECRET, openai_env, run_cli
from tests.fakes.llm_server import Failure, Reply, ToolCall


def test_one_shot_turn_with_a_tool_prints_answer_and_records_usage(tmp_path, server):
    (tmp_path / "workspace").mkdir()
    (tmp_path / "workspace" / "notes.txt").write_text("buy only on pullbacks")
    server.script(
        Reply(tool_calls=[ToolCall("read_file", {"path": "notes.txt"})], input_tokens=100, output_tokens=10),
        Reply("Your note says: buy only on pullbacks", input_tokens=120, output_tokens=12),
    )
    r = run_cli(tmp_path, openai_env(server), "chat", "-m", "what does notes.txt say?")
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "Your note says: buy only on pullbacks"
    assert "read_file" in r.stderr  # progress goes to stderr
    # the tool result reached the model
    second = server.requests[-1].body["messages"]
    assert any(m.get("role") == "tool" and "pullbacks" in str(m.get("content")) for m in second)
    usage = run_cli(tmp_path, {}, "usage", "--days", "1")
    assert usage.returncode == 0 and "220" in usage.stdout and "22" in usage.stdout
    # traces exist and never contain the API key
    traces = list((tmp_path / "traces").rglob("*.jsonl"))
    assert traces and all(SECRET not in p.read_text() for p in traces)
    kinds = [json.loads(line)["kind"] for line in traces[0].read_text().splitlines()]
    assert "input" in kinds and "final" in kinds


def test_one_shot_denies_approval_tools_and_says_so(tmp_path, server):
    def second(body):
        tool_msgs = [m for m in body["messages"] if m.get("role") == "tool"]
        assert "denied" in tool_msgs[-1]["content"] or "nobody" in tool_msgs[-1]["content"]
        return Reply(
            "I could not write the file: writing needs your approval, and nobody can approve in -m mode."
        )

    server.script(Reply(tool_calls=[ToolCall("write_file", {"path": "x.txt", "content": "hi"})]), second)
    r = run_cli(tmp_path, openai_env(server), "chat", "-m", "write hi to x.txt")
    assert r.returncode == 0, r.stderr
    assert "approval" in r.stdout
    assert not (tmp_path / "workspace" / "x.txt").exists()


def test_named_session_continues_across_invocations(tmp_path, server):
    server.script(Reply("Noted: 600519."), Reply("You asked about 600519."))
    assert (
        run_cli(tmp_path, openai_env(server), "chat", "--session", "work", "-m", "remember 600519").returncode
        == 0
    )
    r = run_cli(tmp_path, openai_env(server), "chat", "--session", "work", "-m", "what did I ask about?")
    assert r.returncode == 0
    history = server.requests[-1].body["messages"]
    assert any("remember 600519" in str(m.get("content")) for m in history)


def test_anthropic_provider_from_config_file(tmp_path, server):
    (tmp_path / "config.toml").write_text(
        f"""
[[models]]
id = "main"
provider = "anthropic"
model = "claude-sonnet-4-5"
base_url = "{server.url}"
api_key_env = "MY_KEY"
input_per_1m = 3.0
output_per_1m = 15.0
"""
    )
    server.script(Reply("Hello from Claude", input_tokens=1000, output_tokens=100, cache_read=5000))
    r = run_cli(tmp_path, {"MY_KEY": SECRET}, "chat", "-m", "hi")
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "Hello from Claude"
    body = server.requests[-1].body
    assert body["system"][0]["cache_control"]["type"] == "ephemeral"
    usage = run_cli(tmp_path, {"MY_KEY": SECRET}, "usage")
    assert "5,000" in usage.stdout or "5000" in usage.stdout


def test_provider_401_is_a_clear_error_not_a_traceback(tmp_path, server):
    server.script(Failure(401, {"error": {"message": "invalid api key", "type": "authentication_error"}}))
    r = run_cli(tmp_path, openai_env(server), "chat", "-m", "hi")
    assert r.returncode == 1
    assert "Traceback" not in r.stderr and "rejected" in r.stderr
    assert SECRET not in r.stderr + r.stdout


def test_no_model_configured_says_what_to_set(tmp_path):
    r = run_cli(tmp_path, {}, "chat", "-m", "hi")
    assert r.returncode == 2
    assert "ANTHROPIC_API_KEY" in r.stderr and "Traceback" not in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1


def test_interactive_repl_asks_before_writing(tmp_path, server):
    server.script(
        Reply(tool_calls=[ToolCall("write_file", {"path": "plan.txt", "content": "no position above 15%"})]),
        Reply("Saved your plan."),
    )
    r = run_cli(tmp_path, openai_env(server), "chat", stdin="save my plan\ny\n/exit\n")
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "workspace" / "plan.txt").read_text() == "no position above 15%"
    assert "Allow write_file" in r.stdout + r.stderr and "Saved your plan." in r.stdout


def test_markets_conversation_in_the_terminal(tmp_path, server):
    """analyze 600519 → chart saved to a path + phase; buy 100 → y → one fill; portfolio → P&L."""

    def last_tool(body):
        return next(m for m in reversed(body["messages"]) if m.get("role") == "tool")["content"]

    def phase_answer(body):
        content = json.loads(last_tool(body))
        return Reply(f"Phase {content['phase']['phase']} as of {content['as_of']}.")

    def portfolio_answer(body):
        content = last_tool(body)
        assert "600519" in content
        return Reply("You hold 100 shares of 600519.")

    server.script(
        Reply(tool_calls=[ToolCall("analyze_stock", {"code": "600519"})]),
        phase_answer,
        Reply(tool_calls=[ToolCall("execute_trade", {"code": "600519", "side": "buy", "quantity": 100})]),
        Reply("Bought (paper)."),
        Reply(tool_calls=[ToolCall("portfolio", {"mode": "view"})]),
        portfolio_answer,
    )
    r = run_cli(
        tmp_path,
        openai_env(server),
        "chat",
        "--session",
        "mkt",
        stdin="analyze 600519\nbuy 100 shares\ny\nhow is my portfolio\n/exit\n",
    )
    assert r.returncode == 0, r.stderr
    assert "Phase" in r.stdout and "2025-09-03" in r.stdout
    saved = [line.split("saved ", 1)[1].strip() for line in r.stderr.splitlines() if "saved " in line]
    assert saved and Path(saved[0]).exists() and saved[0].endswith(".png")
    assert "Allow execute_trade" in r.stdout + r.stderr
    assert "You hold 100 shares of 600519." in r.stdout


def test_one_shot_session_end_runs_memory_extraction(tmp_path, server):
    """`chat -m` ends its session: long-term memory extraction runs over it before the process exits,
    instead of being cancelled with the rest of the upkeep."""
    (tmp_path / "workspace").mkdir()
    (tmp_path / "workspace" / "rules.txt").write_text("never chase a rally")
    server.script(
        Reply(tool_calls=[ToolCall("read_file", {"path": "rules.txt"})]),
        Reply("Your rule: never chase a rally."),
        Reply("none"),  # the extraction's answer
    )
    r = run_cli(
        tmp_path, {**openai_env(server), "TAPEBOT_MEMORY__ENABLED": "true"}, "chat", "-m", "my rules?"
    )
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "Your rule: never chase a rally."
    extraction = [q for q in server.requests if "长期记忆" in json.dumps(q.body, ensure_ascii=False)]
    assert len(extraction) == 1


def test_usage_reports_side_calls_apart_from_turns(tmp_path, server):
    """The memory extraction after `chat -m` is a model call of tapebot's own: `tapebot usage`
    counts it as a side call, in no turn."""
    (tmp_path / "workspace").mkdir()
    (tmp_path / "workspace" / "rules.txt").write_text("never chase a rally")
    server.script(
        Reply(tool_calls=[ToolCall("read_file", {"path": "rules.txt"})], input_tokens=100, output_tokens=10),
        Reply("Your rule: never chase a rally.", input_tokens=120, output_tokens=12),
        Reply("none", input_tokens=40, output_tokens=2),  # the extraction's answer
    )
    env = {**openai_env(server), "TAPEBOT_MEMORY__ENABLED": "true"}
    assert run_cli(tmp_path, env, "chat", "-m", "my rules?").returncode == 0
    r = run_cli(tmp_path, {}, "usage", "--days", "1")
    assert r.returncode == 0, r.stderr
    total = next(line for line in r.stdout.splitlines() if line.startswith("total"))
    assert total.split()[1] == "1"  # one turn: the extraction is none
    assert "side calls" in r.stdout
    assert "memory extraction: 1 call, input 40, output 2" in r.stdout
    assert "1 of 3 model calls" in r.stdout
