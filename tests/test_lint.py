"""``ruff check jta`` and ``pyright jta`` are clean (configured in pyproject.toml).

pyright takes about 20 s of one core (more on a fresh machine, where it first installs Node), so
the default run leaves it to ``.ci/run``, which runs it right after the tests; ``--long`` runs it here."""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _run(cmd: list[str]) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=300,
                          env=dict(os.environ, NO_COLOR="1"))


def test_ruff_check_jta():
    if importlib.util.find_spec("ruff") is None:
        pytest.skip("ruff is not installed")
    proc = _run([sys.executable, "-m", "ruff", "check", "jta"])
    assert proc.returncode == 0, proc.stdout + proc.stderr


@pytest.mark.long_only
def test_pyright_jta():
    exe = Path(sys.executable).with_name("pyright")
    pyright = str(exe) if exe.exists() else shutil.which("pyright")
    if pyright is None:
        pytest.skip("pyright is not installed")
    # --pythonpath: resolve imports (jax, numpy) in this interpreter's environment.
    proc = _run([pyright, "--pythonpath", sys.executable, "jta"])
    assert proc.returncode == 0, proc.stdout + proc.stderr
