"""Every ```python block of README.md runs on its own.

Each block runs in a fresh interpreter (a subprocess, so that nothing an earlier block imported,
defined or configured, e.g. ``jax_enable_x64``, leaks into the next one) on the CPU with 8
simulated devices, as the sharding example needs several. Tracebacks point at README.md's lines.
A block opts out only with a first line ``# not-run: <reason>``.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
FENCE = re.compile(r"^([ \t]*)```python[ \t]*\n(.*?)^\1```[ \t]*$", re.M | re.S)
NOT_RUN = re.compile(r"#\s*not-run:\s*(\S.*)")
# Compile the block under README.md's name and line numbers, then run it as a script would run.
RUNNER = "import sys; exec(compile(sys.stdin.read(), 'README.md', 'exec'), {'__name__': '__main__'})"


def python_blocks() -> list[tuple[int, str]]:
    """(first line number in README.md, source) of every ```python block."""
    text = README.read_text(encoding="utf-8")
    return [(text.count("\n", 0, m.start(2)) + 1, textwrap.dedent(m.group(2))) for m in FENCE.finditer(text)]


BLOCKS = python_blocks()


def test_readme_has_python_blocks():
    assert BLOCKS, "no ```python block found in README.md"


@pytest.mark.parametrize("line, source", BLOCKS, ids=[f"README.md:{line}" for line, _ in BLOCKS])
def test_readme_block_runs(line: int, source: str):
    first = source.lstrip().partition("\n")[0]
    if first.lstrip().startswith("# not-run"):
        reason = NOT_RUN.fullmatch(first.strip())
        assert reason, f"README.md:{line}: write the opt-out as '# not-run: <reason>'"
        pytest.skip(f"README.md:{line}: {reason.group(1)}")
    env = dict(os.environ, JAX_PLATFORMS="cpu",
               XLA_FLAGS=f"{os.environ.get('XLA_FLAGS', '')} --xla_force_host_platform_device_count=8".strip())
    proc = subprocess.run([sys.executable, "-c", RUNNER], input="\n" * (line - 1) + source, cwd=ROOT,
                          env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, f"README.md:{line}: the block failed:\n{proc.stdout}\n{proc.stderr[-4000:]}"
