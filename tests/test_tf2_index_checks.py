"""Indices out of range in gathers, scatters and ``ReverseSequence`` fail as in TensorFlow.

JAX clamps, wraps, fills or drops such an index; TensorFlow's CPU kernels raise. Each case is a
``tf.function`` whose index argument is out of range (and the same with valid indices, which must
keep TensorFlow's value): the imported function raises TensorFlow's class and text, eagerly and
under ``jta.checked`` (from compiled code), also inside a loop and for a variable's
``embedding_lookup`` (``ResourceGather``), and a TF1 graph's ``Gather`` through ``import_graph_def``.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

tf = pytest.importorskip("tensorflow")

import jax  # noqa: E402

import jta  # noqa: E402

X = np.arange(12, dtype=np.float32).reshape(4, 3)
TABLE = tf.Variable(np.arange(8, dtype=np.float32).reshape(4, 2), name="table")


def _loop_gather(x: Any, i: Any) -> Any:
    acc = tf.zeros([3])
    for k in tf.range(2):
        acc += tf.gather(x, i[k])
    return acc


# name -> (function of (x, indices), bad indices, good indices)
CASES = {
    "gather": (lambda x, i: tf.gather(x, i), [0, 5], [3, 0]),
    "gather_negative": (lambda x, i: tf.gather(x, i), [0, -1], [1, 1]),
    "gather_axis_1": (lambda x, i: tf.gather(x, i, axis=1), [0, 3], [2, 0]),
    "gather_batch_dims": (lambda x, i: tf.gather(x, i, batch_dims=1), [[0], [1], [2], [3]], [[0], [1], [2], [2]]),
    "gather_in_a_loop": (_loop_gather, [1, 4], [1, 3]),
    "embedding_of_a_variable": (lambda x, i: tf.nn.embedding_lookup(TABLE, i) * x[0, 1], [1, 9], [1, 3]),
    "gather_nd": (lambda x, i: tf.gather_nd(x, i), [[0, 1], [4, 0]], [[0, 1], [3, 2]]),
    "gather_nd_rows": (lambda x, i: tf.gather_nd(x, i), [[2], [-3]], [[2], [0]]),
    "scatter_nd": (lambda x, i: tf.scatter_nd(i, x[:2], [4, 3]), [[0], [7]], [[0], [3]]),
    "tensor_scatter_update": (lambda x, i: tf.tensor_scatter_nd_update(x, i, x[:2]), [[0], [7]], [[0], [2]]),
    "tensor_scatter_add": (lambda x, i: tf.tensor_scatter_nd_add(x, i, x[:2]), [[0], [-1]], [[1], [1]]),
    "reverse_sequence_long": (lambda x, i: tf.reverse_sequence(x, i, seq_axis=1, batch_axis=0), [1, 5, 2, 0],
                              [1, 3, 2, 0]),
    "reverse_sequence_negative": (lambda x, i: tf.reverse_sequence(x, i, seq_axis=1, batch_axis=0), [1, 2, -2, 5],
                                  [0, 0, 0, 0]),
}


def _outcome(fn: Any, *args: Any) -> tuple[Any, ...]:
    try:
        return "ok", np.asarray(fn(*args))
    except Exception as e:  # noqa: BLE001 - compared with TensorFlow's
        return "error", type(e).__name__, str(e)


def _agree(got: tuple[Any, ...], want: tuple[Any, ...]) -> None:
    assert got[0] == want[0], (got, want)
    if want[0] == "ok":
        np.testing.assert_allclose(got[1], want[1])
    else:  # jta's text is TensorFlow's after the node's name (TF adds its function's and node's)
        assert got[1] == want[1], (got, want)
        assert got[2].split("): ", 1)[1] in want[2], (got, want)


@pytest.mark.parametrize("name", CASES)
def test_indices_out_of_range_fail_as_in_tensorflow(name: str) -> None:
    build, bad, good = CASES[name]
    bad_, good_ = np.array(bad, np.int32), np.array(good, np.int32)
    f = tf.function(build, input_signature=[tf.TensorSpec(X.shape, tf.float32), tf.TensorSpec(bad_.shape, tf.int32)])
    jax_fn, params = jta.import_function(f, X, good_)
    checked = jta.checked(jax.jit(jax_fn))
    for indices in (good_, bad_):
        want = _outcome(f, X, indices)
        assert want[0] == ("ok" if indices is good_ else "error"), want
        _agree(_outcome(jax_fn, params, X, indices), want)
        _agree(_outcome(checked, params, X, indices), want)


def test_a_tf1_gather_of_a_fed_index() -> None:
    """``import_graph_def`` shares the op table: a TF1 graph's ``GatherV2`` of a placeholder index."""
    graph = tf.Graph()
    with graph.as_default():
        i = tf.compat.v1.placeholder(tf.int32, [2], name="i")
        tf.identity(tf.gather(tf.constant(X), i), name="out")
    imported = jta.import_graph_def(graph.as_graph_def(), inputs=["i:0"], outputs=["out:0"])
    with tf.compat.v1.Session(graph=graph) as session:
        np.testing.assert_allclose(imported(np.array([3, 1], np.int32))[0], session.run("out:0", {"i:0": [3, 1]}))
        with pytest.raises(tf.errors.InvalidArgumentError) as want:
            session.run("out:0", {"i:0": [3, 4]})
    text = str(want.value.message)
    for run in (imported, jta.checked(jax.jit(imported))):
        with pytest.raises(jta.errors.InvalidArgumentError) as got:
            run(np.array([3, 4], np.int32))
        assert str(got.value).split("): ", 1)[1] in text
