"""deploy/: the Dockerfile, the compose file and the systemd unit say what the README promises.
(No container runtime here: these check the files' content; `systemd-analyze verify` runs when
present.)"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy"


def _instructions(text: str) -> list[tuple[str, str]]:
    joined = re.sub(r"\\\n", " ", text)
    out = []
    for line in joined.splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            word, _, rest = line.partition(" ")
            out.append((word.upper(), rest.strip()))
    return out


def test_dockerfile_slim_non_root_with_a_home_volume():
    steps = _instructions((DEPLOY / "Dockerfile").read_text())
    # the base is an argument (deploy/smoke builds on a local Debian root), slim by default
    assert steps[0][0] == "ARG" and re.fullmatch(r"BASE=\S+-slim", steps[0][1])
    assert steps[1] == ("FROM", "${BASE}")
    env = " ".join(rest for word, rest in steps if word == "ENV")
    assert "TAPEBOT_HOME=/data" in env
    users = [rest for word, rest in steps if word == "USER"]
    assert users and users[-1] not in ("root", "0")
    assert ("VOLUME", '["/data"]') in steps
    # the user switch comes after every install step
    last_run = max(i for i, (w, _) in enumerate(steps) if w == "RUN")
    assert steps.index(("USER", users[-1])) > last_run
    assert any(w == "ENTRYPOINT" and "tapebot" in r for w, r in steps)
    assert any(w == "CMD" and '"run"' in r for w, r in steps)
    ignored = (ROOT / ".dockerignore").read_text().split()
    assert ".env" in ignored and ".venv" in ignored and ".git" in ignored


def test_dockerfile_health_check_asks_tapebot_health():
    steps = _instructions((DEPLOY / "Dockerfile").read_text())
    checks = [rest for word, rest in steps if word == "HEALTHCHECK"]
    assert len(checks) == 1 and checks[0].endswith('CMD ["tapebot", "health"]')
    # the command is on PATH for the health check, which runs outside the entrypoint
    env = " ".join(rest for word, rest in steps if word == "ENV")
    assert "PATH=/opt/tapebot/bin:$PATH" in env
    assert any(w == "RUN" and "python3 -m venv /opt/tapebot" in r for w, r in steps)


def test_compose_has_postgres_with_a_health_check_gating_the_bot():
    text = (DEPLOY / "compose.yaml").read_text()
    assert re.search(r"^  db:\n    image: postgres:", text, re.M)
    assert "pg_isready" in text and "healthcheck:" in text
    assert re.search(r"depends_on:\n\s+db:\n\s+condition: service_healthy", text)
    assert "TAPEBOT_DATABASE_URL: postgresql+asyncpg://" in text
    assert "tapebot-home:/data" in text
    assert "${POSTGRES_PASSWORD:?" in text  # no default password
    assert "\t" not in text


def test_env_example_names_every_secret_and_no_value():
    text = (DEPLOY / "env.example").read_text()
    for name in ("ANTHROPIC_API_KEY", "TELEGRAM_BOT_TOKEN", "DISCORD_BOT_TOKEN", "POSTGRES_PASSWORD"):
        assert re.search(rf"^{name}=$", text, re.M), name


def test_systemd_unit():
    text = (DEPLOY / "tapebot.service").read_text()
    for line in (
        "User=tapebot",
        "Environment=TAPEBOT_HOME=/var/lib/tapebot",
        "ExecStart=/opt/tapebot/bin/tapebot run",
        "Restart=on-failure",
        "UMask=0077",
        "StateDirectoryMode=0700",
        "WantedBy=multi-user.target",
    ):
        assert re.search(rf"^{re.escape(line)}$", text, re.M), line


@pytest.mark.skipif(shutil.which("systemd-analyze") is None, reason="no systemd-analyze here")
def test_systemd_unit_verifies():
    done = subprocess.run(
        ["systemd-analyze", "verify", str(DEPLOY / "tapebot.service")],
        capture_output=True,
        text=True,
        timeout=60,
    )
    problems = [
        line
        for line in (done.stdout + done.stderr).splitlines()
        if line.strip() and "/opt/tapebot/bin/tapebot is not executable" not in line
    ]
    assert problems == []


def test_smoke_script_is_runnable_and_checks_what_the_readme_promises():
    smoke = DEPLOY / "smoke"
    assert smoke.stat().st_mode & 0o111
    done = subprocess.run(["bash", "-n", str(smoke)], capture_output=True, text=True, timeout=30)
    assert done.returncode == 0, done.stderr
    text = smoke.read_text()
    for needed in (
        "--format docker",  # else podman's OCI format drops the HEALTHCHECK
        "podman healthcheck run",
        "tapebot doctor",
        "tapebot chat -m",
        "--security-opt systempaths=unconfined",
        'runtime = "runc"',
        "nofile=16384:16384",
        "debootstrap",
        "podman-compose",  # ignores service_healthy: the bot's own retry is what is tested there
        "not reachable yet",
    ):
        assert needed in text, needed
