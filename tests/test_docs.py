"""Every ```python block of README.md and docs/*.md runs, and prints what the page says it prints.

The blocks of one page run in order in one namespace, in this process (a fresh namespace per
page). When a ```text block follows a ```python block (with only blank lines between), it is the
block's expected output: stdout must equal it, line by line, ignoring trailing spaces. Tracebacks
point at the page's own line numbers. A page whose blocks import TensorFlow is skipped when
TensorFlow is not installed (the ``test`` extra installs it where a wheel exists).

The performance tables of docs/performance.md are generated from the benchmark JSON files by
``python -m benchmarks.report --docs``; a test regenerates them and compares.
"""

from __future__ import annotations

import contextlib
import importlib.util
import io
import os
import re
import subprocess
import sys
from pathlib import Path

import jax
import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
FENCE = re.compile(r"^```(\w*)[^\n]*\n(.*?)^```[ \t]*$", re.M | re.S)


def blocks(path: Path) -> list[tuple[int, str, str | None]]:
    """(first line, source, expected output or None) of every ```python block of a page."""
    text = path.read_text(encoding="utf-8")
    fences = list(FENCE.finditer(text))
    out = []
    for k, m in enumerate(fences):
        if m.group(1) != "python":
            continue
        expected = None
        if k + 1 < len(fences):
            nxt = fences[k + 1]
            if nxt.group(1) == "text" and not text[m.end():nxt.start()].strip():
                expected = nxt.group(2)
        out.append((text.count("\n", 0, m.start(2)) + 1, m.group(2), expected))
    return out


def _lines(text: str) -> list[str]:
    return [line.rstrip() for line in text.strip("\n").splitlines()]


CODE_PAGES = [p for p in PAGES if blocks(p)]


def test_pages_have_examples():
    names = {p.relative_to(ROOT).as_posix() for p in CODE_PAGES}
    assert {"README.md", "docs/getting-started.md", "docs/decoders.md", "docs/errors.md"} <= names


@pytest.mark.parametrize("page", CODE_PAGES, ids=[p.relative_to(ROOT).as_posix() for p in CODE_PAGES])
def test_page_examples_run_and_print_what_the_page_shows(page: Path):
    name = page.relative_to(ROOT).as_posix()
    found = blocks(page)
    if any(re.search(r"^\s*import tensorflow", src, re.M) for _, src, _ in found) \
            and importlib.util.find_spec("tensorflow") is None:
        pytest.skip(f"{name} imports TensorFlow, which is not installed")
    namespace: dict = {"__name__": "__main__"}
    x64 = jax.config.jax_enable_x64
    tf = sys.modules.get("tensorflow")  # a page may switch TF's control flow version: restored after it
    v2 = tf.compat.v1.control_flow_v2_enabled() if tf is not None else True  # (TF's default)
    try:
        for line, source, expected in found:
            code = compile("\n" * (line - 1) + source, str(page), "exec")
            stdout = io.StringIO()
            with contextlib.redirect_stdout(stdout):
                exec(code, namespace)
            if expected is not None:
                assert _lines(stdout.getvalue()) == _lines(expected), \
                    f"{name}:{line}: the block printed\n{stdout.getvalue()}\nbut the page shows\n{expected}"
    finally:
        jax.config.update("jax_enable_x64", x64)
        tf = sys.modules.get("tensorflow")
        if tf is not None and tf.compat.v1.control_flow_v2_enabled() != v2:
            (tf.compat.v1.enable_control_flow_v2 if v2 else tf.compat.v1.disable_control_flow_v2)()


def test_performance_tables_are_generated_from_the_benchmark_json():
    from benchmarks import report

    for path, text in report.docs_tables().items():
        assert path.read_text(encoding="utf-8") == text, \
            f"{path.relative_to(ROOT)} is stale: run python -m benchmarks.report --docs"


def test_docs_build_strictly(tmp_path):
    """``mkdocs build --strict``: a broken link, cross-reference or API reference fails."""
    if importlib.util.find_spec("mkdocs") is None or importlib.util.find_spec("mkdocstrings") is None:
        pytest.skip("mkdocs/mkdocstrings are not installed (pip install -e '.[test]')")
    proc = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path)],
                          cwd=ROOT, capture_output=True, text=True, timeout=300,
                          env=dict(os.environ, NO_MKDOCS_2_WARNING="1", NO_COLOR="1"))
    assert proc.returncode == 0, proc.stdout + proc.stderr
