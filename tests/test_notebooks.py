"""Executes every notebook in ``notebooks/`` with nbclient; a cell that raises fails the test.

(``python -m pytest --nbmake notebooks/`` does the same through the nbmake plugin.)
"""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")
pytest.importorskip("ipykernel")
pytest.importorskip("matplotlib")

NOTEBOOKS_DIR = Path(__file__).resolve().parents[1] / "notebooks"
NOTEBOOKS = sorted(NOTEBOOKS_DIR.glob("*.ipynb"))


def _execute(path: Path) -> nbformat.NotebookNode:
    nb = nbformat.read(path, as_version=4)
    client = nbclient.NotebookClient(nb, timeout=120, kernel_name="python3",
                                     resources={"metadata": {"path": str(NOTEBOOKS_DIR)}})
    client.execute()  # raises CellExecutionError on the first failing cell
    return nb


def _stdout(nb) -> str:
    return "".join(o.get("text", "") for c in nb.cells if c.cell_type == "code"
                   for o in c.outputs if o.output_type == "stream")


def test_notebooks_exist():
    assert [p.name for p in NOTEBOOKS] == [
        "01_quickstart.ipynb", "02_gradients.ipynb", "03_porting_from_tensorflow.ipynb"]


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_notebook_runs(path: Path):
    _execute(path)


def test_porting_notebook_skips_tensorflow_cells_without_tensorflow(tmp_path, monkeypatch):
    fake = tmp_path / "tensorflow"
    fake.mkdir()
    (fake / "__init__.py").write_text('raise ImportError("TensorFlow is hidden for this test")\n')
    monkeypatch.setenv("PYTHONPATH", str(tmp_path))  # the kernel imports the fake first
    nb = _execute(NOTEBOOKS_DIR / "03_porting_from_tensorflow.ipynb")
    out = _stdout(nb)
    assert "TensorFlow: not installed" in out and "skipped: TensorFlow is not installed" in out
    assert "jta InvalidArgumentError:" in out


def test_notebooks_are_small_and_match_their_generator():
    spec = importlib.util.spec_from_file_location("_make_notebooks", NOTEBOOKS_DIR / "_make_notebooks.py")
    assert spec is not None and spec.loader is not None
    maker = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(maker)
    for path in NOTEBOOKS:
        assert path.stat().st_size < 300_000, path
        stored = ["".join(c["source"]) for c in json.loads(path.read_text())["cells"]]
        generated = [c["source"] for c in maker.NOTEBOOKS[path.name]]
        assert stored == generated, f"{path.name} is out of date: run python notebooks/_make_notebooks.py --execute"
