"""Op coverage of jta.import_graph_def against tf2jax: every op type tf2jax converts is supported or
listed in :data:`NOT_COVERED` with a reason.

``tests/data/tf2jax_ops.txt`` lists the op types tf2jax registers (read from its ``ops.py``). Each
case below is a small TF1 graph of the ops jta added for that list, run by ``Session.run`` and
imported (eagerly and under ``jit``); for differentiable float ops the graph also holds
``tf.compat.v1.gradients`` of a weighted sum, and every op type of it is supported.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from pathlib import Path
from typing import Any

import jax
import numpy as np
import pytest

import jta
from jta.graph_import import supported_ops
from tests.helpers.compare import assert_session_outputs

TF2JAX_OPS = Path(__file__).resolve().parent / "data" / "tf2jax_ops.txt"

_RESOURCE = "resource variables (freeze the graph: they become constants)"
_FUNCTIONAL = "functional control flow (function-library bodies; jta runs control flow v1)"
_RANDOM = "stateful random number generation (a stream kept in the op's state; the stateless ops are imported)"
_XLA = "XLA-specific ops (no TF1 program emits them; tf2xla lowers other ops to them)"
NOT_COVERED: dict[str, str] = {
    **dict.fromkeys(("AssignAddVariableOp", "AssignSubVariableOp", "AssignVariableOp", "ReadVariableOp",
                     "VariableV2"), _RESOURCE),
    **dict.fromkeys(("Case", "If", "PartitionedCall", "StatefulPartitionedCall", "StatelessCase", "StatelessIf",
                     "StatelessWhile", "While"), _FUNCTIONAL),
    **dict.fromkeys(("RandomStandardNormal", "RandomUniform", "RandomUniformInt", "XlaRngBitGenerator"), _RANDOM),
    **dict.fromkeys(("XlaConv", "XlaConvV2", "XlaReduceWindow", "XlaSelectAndScatter", "XlaDot", "XlaDotV2",
                     "XlaGather", "XlaPad", "XlaScatter",
                     "XlaVariadicReduceV2", "XlaVariadicSort"), _XLA),
}


def test_tf2jax_ops_not_supported_are_exactly_the_listed_ones():
    lines = TF2JAX_OPS.read_text(encoding="utf-8").splitlines()
    assert lines[0].startswith("# ") and "tf2jax" in lines[0]
    tf2jax_ops = [n for n in lines[1:] if n]
    assert tf2jax_ops == sorted(set(tf2jax_ops))
    missing = set(tf2jax_ops) - set(supported_ops())
    assert missing == set(NOT_COVERED), (f"newly supported: {sorted(set(NOT_COVERED) - missing)}; "
                                         f"unsupported and not listed: {sorted(missing - set(NOT_COVERED))}")


# -- the cases --------------------------------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class Case:
    """``build(tf, x) -> outputs``; with ``grad``, the loss is ``sum(w * outputs[0])`` with fixed weights
    ``w`` and the graph holds its gradient with respect to ``x``."""

    build: Callable[[Any, Any], list[Any]]
    shape: tuple[int, ...] = (2, 3)
    grad: bool = True


def _ints(tf, x):
    return tf.cast(tf.round(x * 10.0), tf.int32)


def _int_ops(tf, x):
    a, b = _ints(tf, x), tf.constant([[3, -4, 5], [-3, 7, -2]])
    return [tf.raw_ops.Div(x=a, y=b), tf.bitwise.bitwise_and(a, b), tf.bitwise.bitwise_or(a, b),
            tf.bitwise.bitwise_xor(a, b), tf.bitwise.invert(a),
            tf.bitwise.left_shift(a, tf.constant([[1, 2, 3], [0, 1, 4]])),
            tf.bitwise.right_shift(a, tf.constant([[1, 2, 3], [0, 1, 4]]))]


def _complex_ops(tf, x):
    c = tf.complex(x, 2.0 * x + 1.0)
    return [tf.math.real(c), tf.math.imag(c), tf.math.conj(c), tf.abs(c), tf.transpose(c, conjugate=True)]


def _segments(tf, x, ids, n):
    return [tf.math.unsorted_segment_max(x, ids, n), tf.math.unsorted_segment_min(x, ids, n),
            tf.math.unsorted_segment_prod(x, ids, n)]


CASES = {
    "trig": Case(lambda tf, x: [tf.tan(0.5 * x) + tf.sinh(x) * tf.cosh(x)]),
    "inverse_hyperbolic": Case(lambda tf, x: [tf.asinh(x) + tf.acosh(1.5 + x * x) + tf.atanh(0.5 * tf.tanh(x))]),
    "expm1_log1p": Case(lambda tf, x: [tf.math.expm1(x) * tf.math.log1p(x * x)]),
    "erf": Case(lambda tf, x: [tf.math.erf(x) + tf.math.erfc(0.5 * x) + tf.math.erfinv(0.5 * tf.tanh(x))]),
    "gamma": Case(lambda tf, x: [tf.math.lgamma(1.5 + x * x) + tf.math.digamma(1.5 + x * x),
                                 tf.math.polygamma(2.0, 1.0 + x * x)]),
    "relu6": Case(lambda tf, x: [tf.nn.relu6(4.0 * x)]),
    "elu": Case(lambda tf, x: [tf.nn.elu(x)]),
    "atan2_div": Case(lambda tf, x: [tf.atan2(x, tf.reverse(x, [1])) + tf.raw_ops.Div(x=x, y=2.0 + x * x)]),
    "l2_loss": Case(lambda tf, x: [tf.nn.l2_loss(x) * x]),
    "cumsum": Case(lambda tf, x: [tf.cumsum(x, 1) + tf.cumsum(x, 0, reverse=True)
                                  + tf.cumsum(x, -1, exclusive=True, reverse=True),
                                  tf.cumsum(x, 1, exclusive=True), tf.math.cumprod(x, 1, exclusive=True),
                                  tf.math.cumprod(x, 0, reverse=True)], (3, 4)),
    "band_part": Case(lambda tf, x: [tf.linalg.band_part(x, 1, 0) + 2.0 * tf.linalg.band_part(x, -1, 1),
                                     tf.linalg.band_part(x, 0, -1)], (3, 4)),
    "einsum": Case(lambda tf, x: [tf.einsum("ij,kj->ik", x, x), tf.einsum("ij->j", x)]),
    "gather_nd": Case(lambda tf, x: [tf.gather_nd(x, [[0, 1], [1, 2], [0, 1]]), tf.gather_nd(x, [[1]])]),
    "scatter_nd": Case(lambda tf, x: [tf.scatter_nd([[1], [1]], x, [3, 3])]),
    "tensor_scatter": Case(lambda tf, x: [tf.tensor_scatter_nd_update(x, [[0, 1], [1, 0]], [5.0, 6.0])
                                          + tf.tensor_scatter_nd_add(x, [[1, 2]], [x[0, 0]])]),
    "top_k": Case(lambda tf, x: list(tf.math.top_k(x, 2)), (3, 4)),
    "segments": Case(lambda tf, x: _segments(tf, x, [0, 1, 0, 1], 2), (4, 3)),
    # forward only
    "segments_empty": Case(lambda tf, x: [*_segments(tf, x, [0, 2, 0, 2], 4),
                                          *_segments(tf, _ints(tf, x), [0, 2, 0, 2], 4)], (4, 3), False),
    "round_is_finite": Case(lambda tf, x: [tf.round(tf.constant([[0.5, 1.5, 2.5], [-0.5, -1.5, -3.7]]) + 0.0 * x),
                                           tf.math.is_finite(tf.math.log(x))], grad=False),
    "integers": Case(_int_ops, grad=False),
    "complex": Case(_complex_ops, grad=False),
    "one_hot": Case(lambda tf, x: [tf.one_hot(_ints(tf, x) // 5, 3),
                                   tf.one_hot(_ints(tf, x) // 5, 4, on_value=2.0, off_value=-1.0, axis=0)],
                    grad=False),
    "broadcast_args": Case(lambda tf, x: [tf.raw_ops.BroadcastArgs(s0=tf.shape(x), s1=[4, 1, 3])], grad=False),
    # TF's kernels write into their input's buffer: each gets its own input
    "inplace_empty": Case(lambda tf, x: [tf.raw_ops.InplaceUpdate(x=x * 2.0, i=[1], v=[[1.0, 2.0, 3.0]]),
                                         tf.raw_ops.InplaceAdd(x=x * 3.0, i=[0], v=[[1.0, 2.0, 3.0]]),
                                         tf.raw_ops.Empty(shape=[2, 3], dtype=tf.float32, init=True) + x],
                          grad=False),
    "igamma": Case(lambda tf, x: [tf.math.igamma(2.0, x * x + 0.1), tf.math.igammac(0.5, x * x + 0.1)], grad=False),
}


@dataclasses.dataclass
class Built:
    graph_def: Any
    feed: np.ndarray
    fetches: list[str]
    expected: list[np.ndarray]  # outputs, then (with a gradient) the loss and TF's gradient
    op_types: set[str]


def _build(case: Case, seed: int) -> Built:
    import tensorflow as tf

    from tests.helpers.tfgraph import k_graph

    feed = np.random.default_rng(seed).standard_normal(case.shape).astype(np.float32)
    with k_graph() as g:
        x = tf.compat.v1.placeholder(tf.float32, (None, *case.shape[1:]), name="x")
        fetches = case.build(tf, x)
        if case.grad:
            y = fetches[0]
            w = tf.sin(tf.reshape(tf.cast(tf.range(tf.size(y)), tf.float32) + 0.5, tf.shape(y)))
            loss = tf.reduce_sum(w * y, name="loss")
            fetches = [*fetches, loss, *tf.compat.v1.gradients(loss, [x])]
        with tf.compat.v1.Session(graph=g) as sess:
            expected = sess.run(fetches, {x: feed})
        op_types = {op.type for op in g.get_operations()}
    return Built(g.as_graph_def(), feed, [t.name for t in fetches], expected, op_types)


@pytest.fixture(scope="module")
def built() -> dict[str, Built]:
    pytest.importorskip("tensorflow")
    return {name: _build(case, seed) for seed, (name, case) in enumerate(CASES.items())}


@pytest.mark.parametrize("name", CASES)
def test_outputs_and_tf_gradient_match_session_run(built, name):
    b = built[name]
    f = jta.import_graph_def(b.graph_def, inputs=["x:0"], outputs=b.fetches)
    assert_session_outputs(f(b.feed), b.expected, 2e-5)
    assert_session_outputs(jax.jit(f)(b.feed), b.expected, 2e-5)


def test_every_gradient_graph_is_supported(built):
    for name, b in built.items():
        assert b.op_types <= set(supported_ops()), f"{name}: {sorted(b.op_types - set(supported_ops()))}"


ADDED = {"Acosh", "Asinh", "Atan2", "Atanh", "BitwiseAnd", "BitwiseOr", "BitwiseXor", "BroadcastArgs", "Complex",
         "ComplexAbs", "Conj", "ConjugateTranspose", "Cosh", "Cumprod", "Cumsum", "Digamma", "Div", "Einsum", "Elu",
         "EluGrad", "Empty", "Erf", "Erfc", "Erfinv", "Expm1", "GatherNd", "Igamma", "Igammac", "Imag", "InplaceAdd",
         "InplaceUpdate", "Invert", "IsFinite", "L2Loss", "LeftShift", "Lgamma", "Log1p", "MatrixBandPart", "OneHot",
         "Polygamma", "Real", "Relu6", "Relu6Grad", "RightShift", "Round", "ScatterNd", "Sinh", "Tan",
         "TensorScatterAdd", "TensorScatterUpdate", "TopKV2", "UnsortedSegmentMax", "UnsortedSegmentMin",
         "UnsortedSegmentProd"}


def test_every_added_op_is_exercised(built):
    seen = set().union(*(b.op_types for b in built.values()))
    assert ADDED <= set(supported_ops())
    assert ADDED <= seen, sorted(ADDED - seen)
