"""The example notebooks: jupytext percent-format sources paired with executed ``.ipynb`` files.

``notebooks/NN_name.py`` is the reviewable source; ``notebooks/NN_name.ipynb`` is its pair
(``formats: ipynb,py:percent``), stored with outputs so that GitHub renders them. Edit either one
(Jupyter with jupytext installed keeps the pair in step), then refresh the pair and its outputs::

    jupytext --sync notebooks/*.py
    python tests/test_notebooks.py        # re-executes each notebook into its .ipynb

(``jupytext --sync`` alone updates the .ipynb inputs and keeps the old outputs; ``jupyter execute
--inplace notebooks/NN_name.ipynb`` also works, but stores cell timings and TensorFlow's start-up
log lines, which ``python tests/test_notebooks.py`` leaves out.)

The tests check that every .py and its .ipynb hold the same cells (types and sources, read with
``jupytext.read``; outputs and metadata are not compared), and execute every notebook from its .py
with nbclient: a cell that raises fails the test.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")
jupytext = pytest.importorskip("jupytext")
pytest.importorskip("ipykernel")
pytest.importorskip("matplotlib")

NOTEBOOKS_DIR = Path(__file__).resolve().parents[1] / "notebooks"
SOURCES = sorted(NOTEBOOKS_DIR.glob("*.py"))
NAMES = ["01_quickstart", "02_gradients", "03_porting_from_tensorflow"]
PAIRING = "ipynb,py:percent"
CELL_TIMEOUT_S = 300


def _cells(nb) -> list[tuple[str, str]]:
    return [(c.cell_type, c.source) for c in nb.cells]


def _execute(nb, record_timing: bool = True):
    client = nbclient.NotebookClient(nb, timeout=CELL_TIMEOUT_S, kernel_name="python3",
                                     record_timing=record_timing,
                                     resources={"metadata": {"path": str(NOTEBOOKS_DIR)}})
    client.execute()  # raises CellExecutionError on the first failing cell
    return nb


def _stdout(nb) -> str:
    return "".join(o.get("text", "") for c in nb.cells if c.cell_type == "code"
                   for o in c.outputs if o.output_type == "stream" and o.name == "stdout")


def test_notebooks_exist_in_pairs():
    assert [p.stem for p in SOURCES] == NAMES
    assert sorted(p.stem for p in NOTEBOOKS_DIR.glob("*.ipynb")) == NAMES
    assert sorted(p.name for p in NOTEBOOKS_DIR.iterdir() if p.is_file()) == sorted(
        [f"{n}.py" for n in NAMES] + [f"{n}.ipynb" for n in NAMES])


@pytest.mark.parametrize("source", SOURCES, ids=lambda p: p.stem)
def test_notebook_pair_in_sync(source: Path):
    text_nb = jupytext.read(source)
    assert text_nb.metadata["jupytext"]["formats"] == PAIRING, f"{source.name}: not paired as {PAIRING}"
    assert text_nb.metadata["jupytext"]["text_representation"]["format_name"] == "percent", source.name

    ipynb = source.with_suffix(".ipynb")
    assert ipynb.stat().st_size < 300_000, ipynb
    stored = nbformat.read(ipynb, as_version=4)
    nbformat.validate(stored)
    assert stored.metadata.get("jupytext", {}).get("formats") == PAIRING, f"{ipynb.name}: not paired as {PAIRING}"
    assert _cells(stored) == _cells(text_nb), (
        f"{ipynb.name} differs from {source.name}: run jupytext --sync notebooks/*.py "
        "and python tests/test_notebooks.py")

    # The stored outputs come from one top-to-bottom run.
    counts = [c.execution_count for c in stored.cells if c.cell_type == "code"]
    assert counts == list(range(1, len(counts) + 1)), (
        f"{ipynb.name} is not executed top to bottom (execution counts {counts}): run python tests/test_notebooks.py")


@pytest.mark.parametrize("source", [pytest.param(s, marks=pytest.mark.long_only) if "quickstart" not in s.stem else s
                                    for s in SOURCES], ids=lambda p: p.stem)
def test_notebook_runs(source: Path):
    """Each notebook runs top to bottom: the quickstart by default, all of them under ``--long`` (the
    TF porting one also runs without TF in ``test_porting_notebook_skips_tensorflow_cells_without_tensorflow``)."""
    _execute(jupytext.read(source))


@pytest.mark.long_only  # (4 s)
def test_porting_notebook_skips_tensorflow_cells_without_tensorflow(tmp_path, monkeypatch):
    fake = tmp_path / "tensorflow"
    fake.mkdir()
    (fake / "__init__.py").write_text('raise ImportError("TensorFlow is hidden for this test")\n')
    monkeypatch.setenv("PYTHONPATH", str(tmp_path))  # the kernel imports the fake first
    nb = _execute(jupytext.read(NOTEBOOKS_DIR / "03_porting_from_tensorflow.py"))
    out = _stdout(nb)
    assert "TensorFlow: not installed" in out and "skipped: TensorFlow is not installed" in out
    assert "jta InvalidArgumentError:" in out


# ------------------------------------------------------------------------------------------
# python tests/test_notebooks.py [NAME ...]: execute the .py sources into their paired .ipynb.

_LOG_NOISE = ("absl::InitializeLog", "oneDNN custom operations", "AutoGraph could not transform")


def _is_log_noise(text: str) -> bool:  # TensorFlow's C++ start-up lines ignore TF_CPP_MIN_LOG_LEVEL
    return all(any(n in line for n in _LOG_NOISE) or not line.strip() or line.startswith(("Cause:", "To silence"))
               for line in text.splitlines())


def store_executed(source: Path) -> Path:
    nb = _execute(jupytext.read(source), record_timing=False)
    for cell in nb.cells:
        if cell.cell_type == "code":
            cell.outputs = [o for o in cell.outputs if not (
                o.output_type == "stream" and o.name == "stderr" and _is_log_noise(o.text))]
    ipynb = source.with_suffix(".ipynb")
    if ipynb.exists():  # keep the stored cell ids of unchanged cells (smaller diffs)
        ids: dict[tuple[str, str], list[str]] = {}
        for cell in nbformat.read(ipynb, as_version=4).cells:
            ids.setdefault((cell.cell_type, cell.source), []).append(cell.id)
        for cell in nb.cells:
            if ids.get((cell.cell_type, cell.source)):
                cell.id = ids[cell.cell_type, cell.source].pop(0)
    jupytext.write(nb, ipynb, fmt="ipynb")
    os.utime(source)  # jupytext expects the text file of a pair to be the newer one
    return ipynb


if __name__ == "__main__":
    for src in SOURCES:
        if len(sys.argv) == 1 or src.stem in sys.argv[1:]:
            print("wrote", store_executed(src).relative_to(NOTEBOOKS_DIR.parent))
