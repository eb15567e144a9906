"""bench/screen.py runs on a fresh clone: without a data file it screens the bundled data and says so."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def test_screen_bench_falls_back_to_bundled_data(tmp_path, monkeypatch, capsys):
    monkeypatch.syspath_prepend(str(ROOT))
    from bench import screen as bench_screen

    monkeypatch.setattr(sys, "argv", ["screen.py"])
    bench_screen.main()
    out = capsys.readouterr().out
    assert "the bundled dataset" in out
    assert "universe: 300 stocks" in out


def test_screen_bench_names_a_missing_file(tmp_path, monkeypatch):
    monkeypatch.syspath_prepend(str(ROOT))
    from bench import screen as bench_screen

    monkeypatch.setattr(sys, "argv", ["screen.py", str(tmp_path / "nope.csv.gz")])
    with pytest.raises(SystemExit, match="missing"):
        bench_screen.main()
