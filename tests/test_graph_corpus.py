"""Self-tests of the GraphDef corpus (:mod:`tests.helpers.graph_corpus`) against TensorFlow itself."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("tensorflow")

from tests.helpers import graph_corpus  # noqa: E402
from tests.helpers.tfgraph import k_graph  # noqa: E402

NAMES = sorted(graph_corpus.CASES)


@pytest.fixture(params=NAMES)
def case(request: pytest.FixtureRequest) -> graph_corpus.GraphCase:
    return graph_corpus.CASES[request.param]()


def test_reimported_graph_reproduces_expected(case: graph_corpus.GraphCase) -> None:
    """The frozen GraphDef alone, imported into a fresh mode-K graph, gives ``expected`` again."""
    import tensorflow as tf

    with k_graph() as graph:
        tf.graph_util.import_graph_def(case.graph_def, name="")
        with tf.compat.v1.Session(graph=graph) as sess:
            got = sess.run(case.outputs, case.feed_dict())
    assert len(got) == len(case.expected) == len(case.outputs)
    for name, g, e in zip(case.outputs, got, case.expected, strict=True):
        assert g.dtype == e.dtype and g.shape == e.shape, name
        np.testing.assert_allclose(g, e, rtol=case.rtol, atol=case.rtol, err_msg=name)


def test_claimed_ops_present(case: graph_corpus.GraphCase) -> None:
    missing = [op for op in case.claims if case.op_counts.get(op, 0) == 0]
    assert not missing, f"{case.name} lacks {missing}; has {case.op_counts}"
    assert sum(case.op_counts.values()) == case.n_nodes


def test_frozen_and_self_contained(case: graph_corpus.GraphCase) -> None:
    """No variables survive freezing, and no function library is needed (control flow v1 only)."""
    leftover = [op for op in graph_corpus._VARIABLE_OPS if op in case.op_counts]
    assert not leftover, leftover
    assert not case.graph_def.library.function
    assert not any(op in case.op_counts for op in ("While", "StatelessWhile", "If", "StatelessIf"))
    placeholders = {n.name for n in case.graph_def.node if n.op == "Placeholder"}
    assert placeholders == {name.split(":")[0] for name in case.inputs}


def test_layout(case: graph_corpus.GraphCase) -> None:
    """outputs[0] is a scalar float loss; the gradients follow the forward outputs, shaped like their inputs."""
    assert len(case.feeds) == len(case.inputs)
    assert case.expected[0].shape == () and case.expected[0].dtype.kind == "f"
    grads = case.expected[case.n_forward:]
    assert len(grads) == len(case.grad_inputs)
    for k, g in zip(case.grad_inputs, grads, strict=True):
        assert g.shape == case.feeds[k].shape and g.dtype == case.feeds[k].dtype
        assert np.all(np.isfinite(g)) and np.any(g != 0)
    float_dtype = np.float64 if case.rtol < 1e-9 else np.float32
    assert case.expected[0].dtype == float_dtype
    assert case.session_seconds > 0


def test_jacobian_has_tensor_array_grad_with_shape() -> None:
    """pfor's jacobian is the one case that makes TensorArrayGradWithShape; keep it that way."""
    counts = graph_corpus.CASES["jacobian"]().op_counts
    assert counts.get("TensorArrayGradWithShape", 0) > 0, counts


def test_every_op_of_interest_is_covered() -> None:
    covered = set().union(*(graph_corpus.CASES[name]().op_counts for name in NAMES))
    missing = set(graph_corpus.OPS_OF_INTEREST) - covered
    assert not missing, missing


def test_import_does_not_import_tensorflow() -> None:
    """Other tests import the helpers package: the corpus module must load without TensorFlow."""
    import pathlib
    import subprocess
    import sys

    code = "import sys, tests.helpers.graph_corpus; assert 'tensorflow' not in sys.modules, 'tensorflow imported'"
    subprocess.run([sys.executable, "-c", code], check=True, cwd=pathlib.Path(__file__).resolve().parents[1])
