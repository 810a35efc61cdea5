"""The importer's neural-network ops (:mod:`jta.graph_import._ops_nn`) against TensorFlow.

Each case is a small TF1 graph of convolutions, pooling, batch norm or LRN on a placeholder with an
unknown batch dimension, in the layouts (``NHWC``/``NCHW``, ``NDHWC``/``NCDHW``), paddings
(``SAME``/``VALID``/``EXPLICIT``), strides and dilations TF's CPU kernels run, with
``tf.compat.v1.gradients`` of a weighted sum of its outputs, with respect to the input and to the
filters and scales (so the filter gradients run too). The imported outputs and TF's gradient graph
match ``Session.run`` under ``jit`` (and eagerly: the smaller graphs by default, all under
``--long``), and ``jax.grad`` of the imported loss matches TF's gradients. Second derivatives
(``MaxPoolGradGrad``, the gradients of the backprop ops) are checked too. Max pooling is also fed
small integers, so that windows hold ties: ``MaxPoolGrad`` and ``MaxPool3DGrad`` give each
window's gradient to its first maximum (``MaxPool3DGrad`` as oneDNN computes it: the suite runs
TensorFlow with oneDNN on every CPU, tests/conftest.py). Outputs TF leaves to its kernels (the
batch norms' reserve spaces) are compared with nothing.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable
from typing import Any, Optional

import jax
import numpy as np
import pytest

import jta
from jta.graph_import import supported_ops
from tests.helpers import budget
from tests.helpers.compare import IMPLEMENTATION_DEFINED, implementation_defined
from tests.helpers.modes import x64_if


@dataclasses.dataclass(frozen=True)
class Case:
    """``build(tf, x, p) -> outputs``, where ``p(seed, shape)`` makes a constant (a filter, a scale)
    that the gradients also differentiate. The loss is a fixed weighted sum of the outputs
    ``in_loss`` picks (all by default), and the graph holds its gradient with respect to ``x`` and
    every constant of ``p`` it depends on, unless ``grad`` is False (where TF's CPU kernels have no
    gradient). ``jax_grad``: ``jax.grad`` of the imported loss equals TF's gradient."""

    build: Callable[[Any, Any, Any], list[Any]]
    shape: tuple[int, ...]
    grad: bool = True
    jax_grad: bool = True
    dtype: str = "float32"
    ties: bool = False  # the feed is small integers
    in_loss: Callable[[list[Any]], list[Any]] = list
    second_order: bool = False  # the loss is a weighted sum of the first gradients, differentiated again
    tol: float = 0.0  # 0: by dtype
    eager: bool = False  # also run eagerly by default (every case does under --long)


class Params:
    """Makes the constants of a case (``param0``, ``param1``, ...) and remembers them."""

    def __init__(self, tf: Any) -> None:
        self.tf, self.tensors = tf, []

    def __call__(self, seed: int, shape: tuple[int, ...], dtype: Any = np.float32) -> Any:
        value = np.random.default_rng(seed).standard_normal(shape).astype(dtype)
        self.tensors.append(self.tf.constant(value, name=f"param{len(self.tensors)}"))
        return self.tensors[-1]


@dataclasses.dataclass
class Built:
    graph_def: Any
    feeds: list[np.ndarray]  # x, then the differentiated constants
    inputs: list[str]
    fetches: list[str]  # outputs, then the loss and TF's gradients (one per input)
    expected: list[Optional[np.ndarray]]  # None: implementation-defined (compared with nothing)
    op_types: set[str]


def weighted_sum(tf, outputs: list[Any], name: str = "loss") -> Any:
    """``sum_k sum(w_k * y_k)`` with fixed weights, in float64 if any output is, else float32."""
    dtype = tf.float64 if any(y.dtype == tf.float64 for y in outputs) else tf.float32
    terms = []
    for k, y in enumerate(outputs):
        w = tf.sin(tf.reshape(tf.cast(tf.range(tf.size(y)), y.dtype) * 0.7 + 0.5 + k, tf.shape(y)))
        terms.append(tf.cast(tf.reduce_sum(w * y), dtype))
    return tf.add_n(terms, name=name)


def _session_config(tf) -> Any:
    """Grappler's remapper rewrites an inference FusedBatchNorm into arithmetic that has no output
    1..5 to fetch: it is off (the graph itself is what is compared)."""
    from tensorflow.core.protobuf import rewriter_config_pb2

    config = tf.compat.v1.ConfigProto()
    config.graph_options.rewrite_options.remapping = rewriter_config_pb2.RewriterConfig.OFF
    return config


def build(case: Case, seed: int) -> Built:
    """The case's graph, its gradients and what ``Session.run`` gives for them. Variables (of
    ``tf.compat.v1.layers``) are differentiated too, then frozen into constants."""
    import tensorflow as tf

    from tests.helpers.tfgraph import k_graph

    rng = np.random.default_rng(seed)
    feed = (rng.integers(0, 3, case.shape) if case.ties else rng.standard_normal(case.shape)).astype(case.dtype)
    with k_graph() as g:
        x = tf.compat.v1.placeholder(case.dtype, (None, *case.shape[1:]), name="x")
        p = Params(tf)
        outputs = case.build(tf, x, p)
        fetches, wrt = list(outputs), [x, *p.tensors, *tf.compat.v1.trainable_variables()]
        if case.grad:
            loss = weighted_sum(tf, [y for y in case.in_loss(outputs) if y.dtype.is_floating])
            grads = tf.compat.v1.gradients(loss, wrt)
            wrt = [t for t, d in zip(wrt, grads, strict=True) if d is not None]
            grads = [tf.convert_to_tensor(d) for d in grads if d is not None]
            if case.second_order:
                loss = weighted_sum(tf, grads, "loss2")
                grads = [tf.convert_to_tensor(d) for d in tf.compat.v1.gradients(loss, wrt)]
            fetches += [loss, *grads]
        with tf.compat.v1.Session(graph=g, config=_session_config(tf)) as sess:
            sess.run(tf.compat.v1.global_variables_initializer())
            expected, feeds = sess.run([fetches, wrt], {x: feed})
            graph_def = tf.compat.v1.graph_util.convert_variables_to_constants(
                sess, g.as_graph_def(), [t.op.name for t in fetches])
    op_types = {n.op for n in graph_def.node}  # what the fetches need
    expected = [None if implementation_defined(t.op.type, t.value_index) else e
                for t, e in zip(fetches, expected, strict=True)]
    return Built(graph_def, feeds, [t.name for t in wrt], [t.name for t in fetches], expected, op_types)


def _compare(got: list[Any], expected: list[Optional[np.ndarray]], tol: float) -> None:
    for k, (g, e) in enumerate(zip(got, expected, strict=True)):
        g = np.asarray(g)
        if e is None:  # the kernel's choice: jta gives an array, what its consumers need
            continue
        assert g.shape == e.shape, (k, g.shape, e.shape)
        assert g.dtype == jax.dtypes.canonicalize_dtype(e.dtype), (k, g.dtype, e.dtype)
        if np.issubdtype(e.dtype, np.inexact):
            np.testing.assert_allclose(g, e, rtol=tol, atol=tol * max(1.0, float(np.max(np.abs(e), initial=0))),
                                       err_msg=f"fetch {k}")
        else:
            np.testing.assert_array_equal(g, e, err_msg=f"fetch {k}")


def _tol(case: Case) -> float:
    return case.tol or {"float64": 1e-12, "float16": 1e-2}.get(case.dtype, 2e-5)


def check_session(b: Built, case: Case) -> None:
    """The imported outputs, loss and TF gradients equal ``Session.run``'s under ``jit`` and, for the
    cases marked ``eager`` (all under ``--long``), eagerly: an eager run compiles each op on its own,
    so it costs seconds for a big graph, and it runs the same op functions as ``jit`` does."""
    with x64_if(case.dtype):
        f = jta.import_graph_def(b.graph_def, inputs=["x:0"], outputs=b.fetches)
        if case.eager or budget.LONG:
            _compare(f(b.feeds[0]), b.expected, _tol(case))
        _compare(jax.jit(f)(b.feeds[0]), b.expected, _tol(case))


def check_jax_grad(b: Built, case: Case) -> None:
    """``jax.grad`` of the imported loss, in ``x`` and the constants fed as inputs, equals TF's gradients."""
    n = len(b.inputs)
    with x64_if(case.dtype):
        f = jta.import_graph_def(b.graph_def, inputs=b.inputs, outputs=[b.fetches[-n - 1]])
        grads = jax.jit(jax.grad(lambda *a: f(*a)[0], argnums=tuple(range(n))))(*b.feeds)
        _compare(list(grads), b.expected[-n:], _tol(case))


def _conv_nhwc(tf, x, p):
    nn = tf.compat.v1.nn
    return [nn.conv2d(x, p(1, (3, 3, 3, 4)), [1, 2, 2, 1], "SAME"),
            nn.conv2d(x, p(2, (2, 3, 3, 2)), [1, 1, 1, 1], "VALID", dilations=[1, 2, 1, 1]),
            nn.conv2d(x, p(3, (3, 2, 3, 2)), [1, 1, 2, 1], [[0, 0], [1, 2], [0, 1], [0, 0]]),
            nn.conv2d(tf.concat([x, x * x], 3), p(4, (1, 2, 3, 4)), [1, 1, 1, 1], "SAME"),  # 2 groups
            nn.conv2d_transpose(x, p(5, (3, 3, 2, 3)), [2, 11, 11, 2], [1, 2, 2, 1], "SAME"),
            nn.conv1d(x[:, 0], p(6, (3, 3, 2)), 2, "VALID")]


def _conv_nchw(tf, x, p):
    nn = tf.compat.v1.nn
    return [nn.conv2d(x, p(1, (3, 3, 3, 4)), [1, 1, 2, 2], "SAME", data_format="NCHW"),
            nn.conv2d(x, p(2, (2, 3, 3, 2)), [1, 1, 1, 1], "SAME", data_format="NCHW",
                      dilations=[1, 1, 2, 2]),
            nn.depthwise_conv2d(x, p(3, (3, 2, 3, 2)), [1, 1, 2, 2], "VALID", data_format="NCHW"),
            nn.conv2d_transpose(x, p(5, (3, 3, 2, 3)), [2, 2, 12, 12], [1, 1, 2, 2], "SAME",
                                data_format="NCHW")]


def _depthwise(tf, x, p):
    nn = tf.compat.v1.nn
    w = p(7, (3, 3, 3, 2))
    return [nn.depthwise_conv2d(x, w, [1, 2, 2, 1], "SAME"),
            nn.depthwise_conv2d(x, w, [1, 1, 1, 1], "SAME", rate=[2, 2]),  # SpaceToBatchND
            nn.separable_conv2d(x, w, p(8, (1, 1, 6, 4)), [1, 1, 1, 1], "VALID"),
            tf.raw_ops.DepthwiseConv2dNative(input=x, filter=w, strides=[1, 1, 1, 1], padding="EXPLICIT",
                                             explicit_paddings=[0, 0, 1, 0, 2, 1, 0, 0]),
            tf.raw_ops.DepthwiseConv2dNativeBackpropInput(input_sizes=[2, 12, 13, 1], filter=p(10, (2, 3, 1, 3)),
                                                          out_backprop=x, strides=[1, 2, 2, 1], padding="VALID"),
            tf.raw_ops.BatchToSpace(input=tf.raw_ops.SpaceToBatch(input=x, paddings=[[1, 1], [0, 2]], block_size=2),
                                    crops=[[0, 1], [1, 0]], block_size=2),
            # input_sizes may give the spatial sizes only
            tf.raw_ops.Conv2DBackpropInput(input_sizes=[6, 6], filter=p(9, (3, 3, 2, 3)), out_backprop=x,
                                           strides=[1, 1, 1, 1], padding="SAME")]


def _explicit_forward(tf, x, p):
    """What TF's CPU kernels compute but cannot differentiate: EXPLICIT padding with NCHW or with dilations."""
    nn = tf.compat.v1.nn
    return [nn.conv2d(x, p(1, (3, 3, 3, 4)), [1, 1, 2, 1], [[0, 0], [0, 0], [1, 2], [0, 1]],
                      data_format="NCHW"),
            nn.conv2d(tf.transpose(x, [0, 2, 3, 1]), p(2, (3, 3, 3, 2)), [1, 2, 1, 1],
                      [[0, 0], [1, 2], [2, 0], [0, 0]], dilations=[1, 2, 2, 1])]


def _conv3d_pool3d(tf, x, p):
    x5 = tf.reshape(x, [-1, 3, 4, 5, 2])
    w = p(9, (2, 3, 3, 2, 3))
    ncdhw = tf.transpose(x5, [0, 4, 1, 2, 3])
    return [tf.nn.conv3d(x5, w, [1, 1, 2, 1, 1], "SAME"), tf.nn.conv3d(x5, w, [1, 1, 1, 2, 1], "VALID"),
            tf.nn.conv3d(ncdhw, w, [1, 1, 1, 1, 1], "SAME", data_format="NCDHW"),
            tf.nn.max_pool3d(x5, [2, 2, 3], [1, 2, 2], "SAME"), tf.nn.avg_pool3d(x5, [2, 3, 2], [2, 1, 2], "SAME"),
            tf.nn.avg_pool3d(ncdhw, 2, 1, "VALID", data_format="NCDHW")]


def _pool2d(tf, x, p):
    nn = tf.compat.v1.nn
    nchw = tf.transpose(x, [0, 3, 1, 2])
    return [nn.max_pool(x, [1, 3, 3, 1], [1, 2, 2, 1], "SAME"), nn.max_pool(x, [1, 2, 3, 1], [1, 1, 2, 1], "VALID"),
            nn.avg_pool(x, [1, 3, 3, 1], [1, 2, 2, 1], "SAME"), nn.avg_pool(x, [1, 2, 2, 1], [1, 1, 1, 1], "VALID"),
            nn.max_pool(nchw, [1, 1, 3, 2], [1, 1, 2, 1], "SAME", data_format="NCHW"),
            nn.avg_pool(nchw, [1, 1, 3, 3], [1, 1, 2, 2], "SAME", data_format="NCHW"),
            tf.raw_ops.MaxPoolV2(input=x, ksize=[1, 3, 2, 1], strides=[1, 2, 1, 1], padding="SAME"),
            tf.raw_ops.MaxPool(input=x, ksize=[1, 3, 3, 1], strides=[1, 2, 2, 1], padding="EXPLICIT",
                               explicit_paddings=[0, 0, 1, 0, 2, 1, 0, 0])]


def _max_pool_ties(tf, x, p):
    x5 = tf.reshape(x, [-1, 1, 6, 6, 3])
    return [*(pools := _pool2d(tf, x, p))[:2], pools[6], tf.nn.max_pool3d(x5, [1, 2, 2], 1, "VALID"),
            *tf.nn.max_pool_with_argmax(x, [2, 3], [1, 2], "SAME", include_batch_in_index=True),
            *tf.nn.max_pool_with_argmax(x, 2, 2, "VALID")]


def _batch_norm(tf, x, p):
    raw, nchw = tf.raw_ops, tf.transpose(x, [0, 3, 1, 2])
    scale, offset = p(10, (3,)) + 1.5, p(11, (3,))
    mean, var = p(12, (3,)), tf.exp(p(13, (3,)))
    outs = []
    for k, op in enumerate((raw.FusedBatchNorm, raw.FusedBatchNormV2, raw.FusedBatchNormV3)):
        for training in (True, False):
            outs += op(x=x if k != 1 else nchw, scale=scale, offset=offset, mean=mean, variance=var,
                       is_training=training, epsilon=0.01, data_format="NHWC" if k != 1 else "NCHW")[:5]
    outs += raw.FusedBatchNormV3(x=x, scale=scale, offset=offset, mean=mean, variance=var, is_training=True,
                                 exponential_avg_factor=0.3, epsilon=0.001)
    x5 = tf.reshape(x, [-1, 2, 3, 6, 3])
    outs += tf.compat.v1.nn.fused_batch_norm(x5, scale, offset, data_format="NDHWC")[:3]
    return outs


def _normalized(outputs: list[Any]) -> list[Any]:
    """The normalized outputs ``y`` of the batch norms (TF differentiates those only)."""
    return [y for y in outputs if y.op.type.startswith("FusedBatchNorm") and y.value_index == 0]


def _lrn(tf, x, p):
    nn = tf.compat.v1.nn
    return [nn.local_response_normalization(x), nn.lrn(x * 3.0, 1, 0.5, 0.3, 0.75)]


def _float64(tf, x, p):
    nn = tf.compat.v1.nn
    return [nn.conv2d(x, p(1, (3, 3, 3, 2), np.float64), [1, 2, 1, 1], "SAME"),
            nn.depthwise_conv2d(x, p(2, (2, 2, 3, 2), np.float64), [1, 1, 1, 1], "SAME"),
            nn.max_pool(x, [1, 2, 2, 1], [1, 2, 2, 1], "SAME"), nn.avg_pool(x, [1, 3, 2, 1], [1, 2, 1, 1], "SAME")]


def _batch_norm_half(tf, x, p):
    """Half-precision ``x``, float32 scale and statistics (FusedBatchNorm has no float64)."""
    scale, offset = p(10, (3,)) + 1.5, p(11, (3,))
    mean, var = p(12, (3,)), tf.exp(p(13, (3,)))
    return [y for training in (True, False)
            for y in tf.raw_ops.FusedBatchNormV3(x=x, scale=scale, offset=offset, mean=mean, variance=var,
                                                 is_training=training)]


def _second_order_pools(tf, x, p):
    nn = tf.compat.v1.nn
    return [nn.max_pool(x, [1, 3, 3, 1], [1, 2, 2, 1], "SAME") ** 2, nn.avg_pool(x, [1, 3, 3, 1], [1, 2, 2, 1], "SAME") ** 2,
            tf.nn.max_pool3d(tf.reshape(x, [-1, 2, 3, 6, 3]), 2, [1, 2, 1], "SAME") ** 2,
            tf.raw_ops.MaxPoolV2(input=x, ksize=[1, 2, 3, 1], strides=[1, 1, 2, 1], padding="VALID") ** 2]


def _second_order(tf, x, p):
    nn = tf.compat.v1.nn
    return [nn.conv2d(x, p(1, (3, 3, 3, 2)), [1, 2, 2, 1], "SAME") ** 2,
            nn.conv2d_transpose(x, p(3, (3, 3, 2, 3)), [2, 11, 11, 2], [1, 2, 2, 1], "SAME") ** 2,
            nn.depthwise_conv2d(x, p(2, (2, 2, 3, 1)), [1, 1, 1, 1], "VALID") ** 2,
            nn.fused_batch_norm(x, p(3, (3,)), p(4, (3,)))[0] ** 2]  # LRNGrad has no gradient in TF


IMAGE = (2, 6, 6, 3)
CASES = {
    "conv_nhwc": Case(_conv_nhwc, IMAGE),
    "conv_nchw": Case(_conv_nchw, (2, 3, 6, 6)),
    "depthwise": Case(_depthwise, IMAGE),
    "explicit_forward": Case(_explicit_forward, (2, 3, 6, 6), grad=False, eager=True),
    "conv3d_pool3d": Case(_conv3d_pool3d, (2, 3, 40)),
    "pool2d": Case(_pool2d, IMAGE),
    "max_pool_ties": Case(_max_pool_ties, IMAGE, ties=True, eager=True),
    "batch_norm": Case(_batch_norm, IMAGE, in_loss=_normalized),
    "lrn": Case(_lrn, IMAGE, eager=True),
    "float64": Case(_float64, IMAGE, dtype="float64"),
    "batch_norm_half": Case(_batch_norm_half, IMAGE, dtype="float16", in_loss=_normalized, eager=True),
    "second_order_pools": Case(_second_order_pools, IMAGE, second_order=True),
    **({"second_order": Case(_second_order, IMAGE, second_order=True)} if budget.LONG else {}),
}


class Cases(dict):
    """The built cases, each built when first asked for: a graph TensorFlow's kernels refuse
    fails its own tests, not the module's."""

    def __missing__(self, name: str) -> Built:
        self[name] = build(CASES[name], list(CASES).index(name))
        return self[name]


def _onednn_off() -> bool:
    return os.environ.get("TF_ENABLE_ONEDNN_OPTS") in ("0", "false", "False")


def built_case(built: Cases, name: str) -> Built:
    """Case ``name``; where the suite runs against TF's Eigen kernels (``TF_ENABLE_ONEDNN_OPTS=0``,
    tests/conftest.py), the graphs those refuse (dilated or NCHW convolutions, NCHW pools) have no
    oracle: they are skipped, saying so."""
    import tensorflow as tf

    if CASES[name].ties and _onednn_off():
        pytest.skip("which maximum of a tie gets MaxPool3DGrad's gradient is the kernel's choice: "
                    "the suite's oracle is oneDNN's")
    try:
        return built[name]
    except (tf.errors.InvalidArgumentError, tf.errors.UnimplementedError) as e:
        if _onednn_off():
            pytest.skip(f"TensorFlow without oneDNN does not run this graph: {e.message.splitlines()[0]}")
        raise


@pytest.fixture(scope="module")
def built() -> Cases:
    pytest.importorskip("tensorflow")
    return Cases()


@pytest.mark.parametrize("name", CASES)
def test_outputs_and_tf_gradient_match_session_run(built, name):
    check_session(built_case(built, name), CASES[name])


@pytest.mark.parametrize("name", [n for n, c in CASES.items() if c.grad and c.jax_grad])
def test_jax_grad_of_the_import_matches_tf_gradient(built, name):
    check_jax_grad(built_case(built, name), CASES[name])


def test_implementation_defined_outputs_are_every_reserve_space():
    """The outputs no test compares (tests/helpers/compare.py) are exactly those TF's op registry
    names ``reserve_space*``, among the ops the importer supports."""
    pytest.importorskip("tensorflow")
    from tensorflow.python.framework import op_def_registry

    named = set()
    for op in supported_ops():
        op_def = op_def_registry.get(op)
        if op_def is not None:
            named |= {(op, k) for k, arg in enumerate(op_def.output_arg) if arg.name.startswith("reserve_space")}
    assert named == IMPLEMENTATION_DEFINED


# the op types of _ops_nn this file runs (tests/test_graph_nn_vocabulary.py runs the others)
ADDED = {"AvgPool", "AvgPool3D", "AvgPool3DGrad", "AvgPoolGrad", "BatchToSpace", "BatchToSpaceND", "Conv2D",
         "Conv2DBackpropFilter", "Conv2DBackpropInput", "Conv3D", "Conv3DBackpropFilterV2", "Conv3DBackpropInputV2",
         "DepthwiseConv2dNative", "DepthwiseConv2dNativeBackpropFilter", "DepthwiseConv2dNativeBackpropInput",
         "FusedBatchNorm", "FusedBatchNormGrad", "FusedBatchNormGradV3", "FusedBatchNormV2", "FusedBatchNormV3", "LRN",
         "LRNGrad", "MaxPool", "MaxPool3D", "MaxPool3DGrad", "MaxPool3DGradGrad", "MaxPoolGrad", "MaxPoolGradGrad",
         "MaxPoolGradV2", "MaxPoolGradWithArgmax", "MaxPoolV2", "MaxPoolWithArgmax", "SpaceToBatch", "SpaceToBatchND"}


def test_every_graph_is_supported_and_every_added_op_is_exercised(built):
    if _onednn_off():
        pytest.skip("TensorFlow without oneDNN does not run every graph (see built_case)")
    for name in CASES:
        built[name]
    for name, b in built.items():
        assert b.op_types <= set(supported_ops()), f"{name}: {sorted(b.op_types - set(supported_ops()))}"
    seen = set().union(*(b.op_types for b in built.values()))
    assert ADDED <= seen, sorted(ADDED - seen)
