"""Every example in jta's docstrings runs (doctest), and every example is written to run."""

from __future__ import annotations

import doctest
import importlib
import pathlib
import re

import pytest

PACKAGE = pathlib.Path(__file__).resolve().parent.parent / "jta"
MODULES = sorted("jta." + ".".join(p.relative_to(PACKAGE).with_suffix("").parts).removesuffix(".__init__")
                 for p in PACKAGE.rglob("*.py") if p.stem != "__main__")


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples_run(name):
    module = importlib.import_module(name)
    finder = doctest.DocTestFinder(exclude_empty=True)
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    for test in finder.find(module, name, globs={}):
        runner.run(test)
    result = runner.summarize(verbose=False)
    assert result.failed == 0, f"{result.failed} docstring example(s) of {name} failed (output above)"


@pytest.mark.parametrize("name", MODULES)
def test_every_example_block_is_a_doctest(name):
    """A ```python block in a docstring must be doctest-formatted, so that it is executed."""
    parts = name.split(".")[1:]
    path = PACKAGE.joinpath(*parts).with_suffix(".py")
    source = (path if path.exists() else PACKAGE.joinpath(*parts, "__init__.py")).read_text()
    for block in re.findall(r"```python\n(.*?)```", source, re.S):
        assert ">>>" in block, f"{name}: an example block is not a doctest:\n{block}"
