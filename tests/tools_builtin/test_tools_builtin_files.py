"""read_file / write_file confinement: escapes, symlinks, protected files, spilled results."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from agent.errors import InvalidToolArguments, ToolDenied, ToolFailed
from agent.tools.builtin import local_tools
from agent.tools.registry import Deps, ToolContext
from agent.tools.workspace import LocalToolPolicy, resolve_path


def test_specs_flags():
    read, write = local_tools.get("read_file").spec, local_tools.get("write_file").spec
    assert read.concurrency_safe and not read.requires_approval and read.side_effect == "read_only"
    assert write.requires_approval and write.side_effect == "mutating" and not write.concurrency_safe
    ex, web = local_tools.get("exec_command").spec, local_tools.get("web_fetch").spec
    assert ex.requires_approval and ex.side_effect == "mutating"
    assert web.concurrency_safe and not web.requires_approval


async def test_read_inside_workspace(call, policy):
    (policy.workspace / "notes").mkdir()
    (policy.workspace / "notes" / "a.txt").write_text("hello\nworld\n")
    assert await call("read_file", path="notes/a.txt") == "hello\nworld\n"
    # an absolute path inside the workspace is fine too
    assert await call("read_file", path=str(policy.workspace / "notes" / "a.txt")) == "hello\nworld\n"
    listing = await call("read_file", path="notes")
    assert "a.txt" in listing


@pytest.mark.parametrize(
    "path",
    ["../config.toml", "../../etc/passwd", "notes/../../.env", "/etc/passwd", "~/.ssh/id_rsa", "/"],
)
async def test_escapes_are_denied(call, path):
    with pytest.raises(ToolDenied):
        await call("read_file", path=path)
    with pytest.raises(ToolDenied):
        await call("write_file", path=path, content="x")


async def test_dotdot_is_refused_even_when_it_stays_inside(call, policy):
    (policy.workspace / "a").mkdir()
    with pytest.raises(ToolDenied, match=r"'\.\.' is not allowed"):
        await call("read_file", path="a/../a")


async def test_symlink_out_of_workspace_refused_for_read_and_write(call, policy, tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("top secret")
    ws = policy.workspace
    os.symlink("/etc", ws / "etc")
    os.symlink(outside / "secret.txt", ws / "leak.txt")
    os.symlink(outside, ws / "outdir")
    os.symlink(outside / "not-yet", ws / "dangling")  # dangling link pointing out

    for path in ("etc/passwd", "etc", "leak.txt", "outdir/secret.txt"):
        with pytest.raises(ToolDenied, match="symlink"):
            await call("read_file", path=path)
    for path in ("etc/evil", "leak.txt", "outdir/new.txt", "dangling", "outdir/sub/new.txt"):
        with pytest.raises(ToolDenied, match="symlink"):
            await call("write_file", path=path, content="pwned")
    assert (outside / "secret.txt").read_text() == "top secret"
    assert not (outside / "new.txt").exists() and not (outside / "not-yet").exists()
    assert not (outside / "sub").exists()


async def test_symlink_inside_workspace_is_followed(call, policy):
    ws = policy.workspace
    (ws / "real").mkdir()
    (ws / "real" / "f.txt").write_text("inside")
    os.symlink(ws / "real", ws / "alias")
    assert await call("read_file", path="alias/f.txt") == "inside"
    await call("write_file", path="alias/g.txt", content="via link")
    assert (ws / "real" / "g.txt").read_text() == "via link"


async def test_symlink_to_protected_file_inside_root_refused(tmp_path):
    # workspace == home: the config and database are inside the root, still never readable
    home = tmp_path / "h"
    home.mkdir()
    (home / "config.toml").write_text("x")
    (home / "tapebot.db-wal").write_text("x")
    (home / "sub").mkdir()
    os.symlink(home / "config.toml", home / "sub" / "cfg")
    pol = LocalToolPolicy(workspace=home, protected=[home / "config.toml", home / "tapebot.db*"])
    ctx = ToolContext(deps=Deps(pol), workspace=home)
    read = local_tools.get("read_file")
    for path in ("config.toml", "tapebot.db-wal", "sub/cfg", str(home / "config.toml")):
        with pytest.raises(ToolDenied, match="protected"):
            await read.call(ctx, {"path": path})


async def test_protected_names_anywhere_in_workspace(call, policy):
    (policy.workspace / "proj").mkdir()
    (policy.workspace / "proj" / ".env").write_text("TOKEN=abc")
    (policy.workspace / "tapebot.db").write_text("db")
    for path in ("proj/.env", "tapebot.db"):
        with pytest.raises(ToolDenied, match="protected"):
            await call("read_file", path=path)
    with pytest.raises(ToolDenied, match="protected"):
        await call("write_file", path="proj/.env", content="x")
    listing = await call("read_file", path="proj")
    assert ".env" not in listing


async def test_spilled_results_read_back(call, policy):
    assert policy.results_dir is not None
    blob = "".join(f"line {i}\n" for i in range(3000))
    (policy.results_dir / "20250101_analyze_stock_c9_ab12.json").write_text(blob)
    first = await call("read_file", path="results/20250101_analyze_stock_c9_ab12.json", limit=100)
    assert first.startswith("line 0\n")
    assert "offset=100" in first
    nxt = await call("read_file", path="results/20250101_analyze_stock_c9_ab12.json", offset=100, limit=50)
    assert nxt.startswith(blob[100:150])
    # the absolute reference works as well
    whole = await call(
        "read_file", path=str(policy.results_dir / "20250101_analyze_stock_c9_ab12.json"), limit=100000
    )
    assert whole.startswith(blob[:1000])
    # but writing there is confined to the workspace: results/x goes to workspace/results/x
    await call("write_file", path="results/mine.txt", content="w")
    assert (policy.workspace / "results" / "mine.txt").read_text() == "w"
    assert not (policy.results_dir / "mine.txt").exists()
    with pytest.raises(ToolDenied):
        await call("write_file", path=str(policy.results_dir / "x.txt"), content="w")


def test_results_path_cannot_escape_results_dir(policy):
    with pytest.raises(ToolDenied):
        resolve_path(policy, "results/../config.toml")
    os.symlink("/etc", policy.results_dir / "etc")
    with pytest.raises(ToolDenied, match="symlink"):
        resolve_path(policy, "results/etc/passwd")


async def test_write_creates_dirs_inside_workspace(call, policy):
    out = await call("write_file", path="a/b/c/report.md", content="# hi\n")
    assert "created a/b/c/report.md" in out
    assert (policy.workspace / "a" / "b" / "c" / "report.md").read_text() == "# hi\n"
    out = await call("write_file", path="a/b/c/report.md", content="v2")
    assert "overwrote" in out
    assert (policy.workspace / "a" / "b" / "c" / "report.md").read_text() == "v2"
    assert not list((policy.workspace / "a" / "b" / "c").glob(".tapebot-*"))


async def test_write_refuses_directory_and_oversize(call, policy):
    (policy.workspace / "d").mkdir()
    with pytest.raises(ToolFailed, match="directory"):
        await call("write_file", path="d", content="x")
    policy.write_max_bytes = 10
    with pytest.raises(InvalidToolArguments):
        await call("write_file", path="big.txt", content="x" * 11)


async def test_read_errors_are_clear(call, policy):
    with pytest.raises(ToolFailed, match="does not exist"):
        await call("read_file", path="nope.txt")
    (policy.workspace / "bin.dat").write_bytes(b"\x00\x01\x02")
    assert "binary file" in await call("read_file", path="bin.dat")
    os.mkfifo(policy.workspace / "fifo")
    with pytest.raises(ToolFailed, match="not a regular file"):
        await call("read_file", path="fifo")
    with pytest.raises(InvalidToolArguments):
        await call("read_file", path="x", offset=-1)
    with pytest.raises(InvalidToolArguments):
        await call("read_file", path="")
    with pytest.raises(InvalidToolArguments):  # schema: offset must be an integer
        await call("read_file", path="x", offset="ten")


async def test_read_output_is_redacted(call, policy, secret):
    (policy.workspace / "leak.txt").write_text(f"key is {secret} and sk-ant-api03-abcdefghijklmnopqrstuv\n")
    text = await call("read_file", path="leak.txt")
    assert secret not in text and "sk-ant-api03" not in text
    assert text.count("***") == 2


async def test_default_policy_from_ctx_workspace(tmp_path: Path):
    ws = tmp_path / "w"
    ws.mkdir()
    (ws / "f.txt").write_text("ok")
    ctx = ToolContext(workspace=ws)  # no LocalToolPolicy in deps
    assert await local_tools.get("read_file").call(ctx, {"path": "f.txt"}) == "ok"
    with pytest.raises(ToolDenied):
        await local_tools.get("read_file").call(ctx, {"path": "/etc/passwd"})


async def test_spilled_result_reads_back_in_windows_that_never_spill_again(call, policy):
    from agent.executor import SPILL_CHARS

    blob = "".join(f"{i:05d} " + "x" * 60 + "\n" for i in range(1000))  # ~67K characters
    (policy.results_dir / "screen_stocks_c1.txt").write_text(blob)
    got, offset = [], 0
    while True:
        out = await call("read_file", path="results/screen_stocks_c1.txt", offset=offset)
        assert len(out) <= SPILL_CHARS  # the executor would spill anything longer
        body, sep, footer = out.partition("\n[… truncated: ")
        if not sep:
            body, end, _ = body.partition("\n[end of 'results/screen_stocks_c1.txt'")
            assert end
            got.append(body)
            break
        got.append(body)
        offset = int(footer.split("offset=")[1].split("]")[0].split()[0])
    assert "".join(got) == blob
