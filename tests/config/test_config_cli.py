"""bot.cli in-process: init, config check (masked), one-line errors, exit codes, lazy imports."""

from __future__ import annotations

import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from bot import cli

KEY = "sk-ant-api03-cli-secret-value-9876"
TG = "987654:telegram-secret-token-zz"


def run(capsys, *argv: str) -> tuple[int, str, str]:
    code = cli.main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_init_writes_starter_and_refuses_to_overwrite(home, capsys):
    code, out, _ = run(capsys, "init")
    path = home / "config.toml"
    assert code == 0 and path.exists() and str(path) in out
    tomllib.loads(path.read_text())  # the starter is valid TOML

    path.write_text("# mine\n")
    code, _, err = run(capsys, "init")
    assert code == 2
    assert err == f"tapebot: {path}: already exists — pass --force to overwrite it\n"
    assert path.read_text() == "# mine\n"

    assert run(capsys, "init", "--force")[0] == 0
    assert "[agent]" in path.read_text()


def test_starter_config_loads_with_an_env_key(home, capsys, monkeypatch):
    run(capsys, "init")
    monkeypatch.setenv("ANTHROPIC_API_KEY", KEY)
    code, out, err = run(capsys, "config", "check")
    assert code == 0, err
    assert "# OK: models main" in out


def test_config_check_masks_secrets(home, capsys, monkeypatch):
    home.mkdir()
    (home / "config.toml").write_text(
        '[[models]]\nid = "main"\nprovider = "openai"\nmodel = "m"\napi_key = "sk-inline-secret-in-file-4321"\n'
        "[telegram]\nallowed_users = [1]\n"
    )
    monkeypatch.setenv("TELEGRAM_BOT_TOKEN", TG)
    code, out, err = run(capsys, "config", "check")
    assert code == 0, err
    assert "sk-inline-secret-in-file-4321" not in out and TG not in out
    assert 'api_key = "sk-…4321"' in out
    assert 'token = "987…n-zz"' in out
    assert "enabled = true" in out
    body = tomllib.loads("\n".join(line for line in out.splitlines() if not line.startswith("#")))
    assert body["models"][0]["model"] == "m"


def test_config_check_error_is_one_line_exit_2(home, capsys):
    home.mkdir()
    path = home / "config.toml"
    path.write_text('[[models]]\nid = "main"\nprovider = "gemini"\nmodel = "x"\n')
    code, out, err = run(capsys, "config", "check")
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and "Traceback" not in err
    assert err.startswith(f"tapebot: {path}: key 'models[0].provider': unknown provider 'gemini'")


def test_no_model_anywhere_says_what_to_set(home, capsys):
    code, _, err = run(capsys, "config", "check")
    assert code == 2
    assert "set ANTHROPIC_API_KEY, or OPENAI_API_KEY" in err and "tapebot init" in err


def test_home_option_beats_environment(tmp_path, home, capsys):
    other = tmp_path / "other"
    code, _, _ = run(capsys, "--home", str(other), "init")
    assert code == 0 and (other / "config.toml").exists() and not home.exists()


def test_unexpected_error_is_one_line_with_debug_hint(home, capsys, monkeypatch):
    def boom(ctx, *, days):
        raise RuntimeError("kaput\nsecond line")

    monkeypatch.setattr(cli, "cmd_usage", boom)
    code, _, err = run(capsys, "usage")
    assert code == 1
    assert (
        err == "tapebot: unexpected error: RuntimeError: kaput second line (rerun with --debug for details)\n"
    )
    with pytest.raises(RuntimeError):
        cli.main(["--debug", "usage"])


def test_missing_extension_is_reported(home, capsys, monkeypatch):
    def missing(argv, ctx):
        import bot.no_such_module_here  # noqa: F401

    monkeypatch.setitem(cli.EXTENSIONS, "nothing", ("x", missing))
    code, _, err = run(capsys, "nothing", "check")
    assert code == 1 and err == "tapebot: 'nothing' is not available in this build\n"


def test_extension_gets_its_arguments(home, capsys, monkeypatch):
    seen = {}

    def fake(argv, ctx):
        seen["argv"], seen["home"] = argv, ctx.home
        return 7

    monkeypatch.setitem(cli.EXTENSIONS, "fake", ("x", fake))
    code = cli.main(["--home", "/tmp/x", "fake", "check", "--verbose"])
    assert code == 7 and seen == {"argv": ["check", "--verbose"], "home": Path("/tmp/x")}


def test_chat_model_override_must_exist(home, capsys, monkeypatch):
    monkeypatch.setenv("ANTHROPIC_API_KEY", KEY)
    code, _, err = run(capsys, "chat", "--model", "nope", "-m", "hi")
    assert code == 2 and "key 'agent.model': names no model 'nope'" in err


def test_help_imports_nothing_heavy():
    code = (
        "import sys, contextlib, io\n"
        "import bot.cli\n"
        "with contextlib.redirect_stdout(io.StringIO()):\n"
        "    try: bot.cli.main(['--help'])\n"
        "    except SystemExit: pass\n"
        "heavy = [m for m in ('sqlalchemy', 'pydantic', 'pydantic_settings', 'anthropic', 'openai', 'telegram', 'discord')"
        " if m in sys.modules]\n"
        "print(heavy)\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=Path(cli.__file__).parents[2]
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]"
