"""The vocabulary TF1 programs were written in: ``tf.compat.v1.nn``, ``tf.compat.v1.losses`` and a
seq2seq-style ``sequence_loss`` and ``tf.compat.v1.layers`` (where tf_keras is installed),
imported and compared with TensorFlow.

One graph per family holds many functions of the API at once (the import is checked as a whole, and
the suite stays fast); like ``tests/test_graph_ops_nn.py`` (whose harness this reuses), each holds
``tf.compat.v1.gradients`` of a weighted sum of its outputs with respect to the input and to the
constants standing for weights. The imported outputs and TF's gradients match ``Session.run``
under ``jit`` (and eagerly: the smaller graphs by default, all under ``--long``), and ``jax.grad``
of the imported loss matches TF's gradients.
``tests/test_graph_ops_nn.py`` covers the layers of the API built on a single op (``conv1d``,
``conv2d``, ``conv2d_transpose``, ``depthwise_conv2d``, ``separable_conv2d``, ``max_pool``,
``avg_pool``, ``fused_batch_norm``, ``local_response_normalization``).

Random functions (``dropout`` with a positive rate, sampled losses) cannot give TF's values: they are
refused by op type, with the nodes named.
"""

from __future__ import annotations

import importlib.util

import numpy as np
import pytest

import jta
from jta import errors
from tests.test_graph_ops_nn import Built, Case, build, check_jax_grad, check_session


def _images(tf, x, p):
    """Normalization, moments and the dilated and pooling wrappers, on ``x`` of shape [n, 6, 6, 3]."""
    nn = tf.compat.v1.nn
    mean, variance = nn.moments(x, [0, 1, 2])
    w_mean, w_variance = nn.weighted_moments(x, [1, 2], tf.sigmoid(x), keepdims=True)
    counts = nn.sufficient_statistics(x, [0, 1])
    return [nn.batch_normalization(x, mean, variance, p(1, (3,)), p(2, (3,)), 1e-3),
            nn.batch_normalization(x, w_mean, w_variance, None, None, 1e-2),
            *nn.normalize_moments(counts[0], counts[1], counts[2], None),
            nn.l2_normalize(x, [1, 2]), nn.l2_normalize(x * 0.0 + x[:, :1], -1),
            nn.atrous_conv2d(x, p(3, (2, 2, 3, 2)), 2, "SAME"),
            nn.convolution(x, p(4, (3, 2, 3, 2)), "VALID", dilation_rate=[1, 2]),
            nn.pool(x, [2, 2], "AVG", "VALID", dilation_rate=[2, 1]),
            nn.pool(x, [3, 3], "MAX", "SAME", strides=[2, 2]),
            nn.conv3d_transpose(tf.reshape(x, [-1, 2, 3, 6, 3]), p(5, (2, 2, 2, 4, 3)), [2, 4, 6, 12, 4],
                                [1, 2, 2, 2, 1], "SAME"),
            tf.nn.max_pool1d(x[:, 0], 2, 2, "SAME"), tf.nn.avg_pool1d(x[:, 1], 3, 1, "VALID"),
            nn.space_to_depth(x, 2), nn.depth_to_space(tf.concat([x, x * x, 2.0 * x, x + 1.0], 3), 2),
            *nn.max_pool_with_argmax(x, [1, 3, 3, 1], [1, 2, 2, 1], "SAME")]


def _activations(tf, x, p):
    """Activations and the small functions of ``tf.compat.v1.nn``, on logits ``x`` of shape [n, 5]."""
    nn = tf.compat.v1.nn
    top = nn.top_k(x, 3)
    return [nn.relu(x), nn.relu6(4.0 * x), nn.elu(x), nn.selu(x), nn.leaky_relu(x, 0.1), nn.crelu(x),
            nn.softsign(x), tf.nn.gelu(x), tf.nn.gelu(x, approximate=True), tf.nn.swish(x), nn.softplus(x),
            nn.sigmoid(x), nn.tanh(x), nn.softmax(x), nn.softmax(x, axis=0), nn.log_softmax(x),
            nn.bias_add(x, p(1, (5,))), nn.xw_plus_b(x, p(2, (5, 2)), p(3, (2,))),
            nn.relu_layer(x, p(4, (5, 3)), p(5, (3,))), nn.l2_loss(x), nn.dropout(x, keep_prob=1.0),
            nn.dropout(x, rate=0.0), nn.zero_fraction(nn.relu(x)), top.values, top.indices,
            nn.in_top_k(x, [0, 1, 2, 3], 2), nn.embedding_lookup(x * 2.0, [0, 3, 3, 1]),
            nn.embedding_lookup([x, 3.0 * x], [0, 5, 7, 2], partition_strategy="div"),
            nn.log_poisson_loss(tf.constant([[1.0, 0.0, 2.0, 3.0, 1.0]]), x, compute_full_loss=True),
            # what older TF versions emitted for these
            tf.raw_ops.InTopK(predictions=x, targets=[4, 1, 0, 3], k=3), tf.raw_ops.SoftplusGrad(gradients=x, features=2.0 * x)]


def _labels() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(7)
    sparse = np.array([0, 2, 1, 4], np.int32)
    return sparse, np.eye(5, dtype=np.float32)[sparse], rng.uniform(0.05, 0.95, (4, 5)).astype(np.float32)


def _losses(tf, x, p):
    """The cross entropies of ``tf.compat.v1.nn`` and ``tf.compat.v1.losses``, on logits [4, 5]."""
    nn, losses = tf.compat.v1.nn, tf.compat.v1.losses
    sparse, onehot, soft = _labels()
    weights = tf.constant([[1.0], [2.0], [0.0], [0.5]])
    return [nn.sigmoid_cross_entropy_with_logits(labels=soft, logits=x),
            nn.softmax_cross_entropy_with_logits(labels=soft / soft.sum(1, keepdims=True), logits=x),
            nn.softmax_cross_entropy_with_logits_v2(labels=onehot, logits=x, axis=-1),
            nn.sparse_softmax_cross_entropy_with_logits(labels=sparse, logits=x),
            nn.weighted_cross_entropy_with_logits(labels=soft, logits=x, pos_weight=2.5),
            losses.mean_squared_error(soft, x), losses.absolute_difference(soft, x, weights),
            losses.huber_loss(soft, 2.0 * x, delta=0.5), losses.log_loss(soft, tf.sigmoid(x)),
            losses.hinge_loss(onehot, x), losses.cosine_distance(nn.l2_normalize(soft, 1), nn.l2_normalize(x, 1), 1),
            losses.sigmoid_cross_entropy(onehot, x, label_smoothing=0.1),
            losses.softmax_cross_entropy(onehot, x, weights=[1.0, 2.0, 0.0, 0.5], label_smoothing=0.2),
            losses.sparse_softmax_cross_entropy(sparse, x, weights=[1.0, 2.0, 0.0, 0.5]),
            losses.mean_pairwise_squared_error(soft, x),
            losses.mean_squared_error(soft, x, weights, reduction=losses.Reduction.SUM),
            losses.absolute_difference(soft, x, weights, reduction=losses.Reduction.NONE),
            losses.huber_loss(soft, x, weights, reduction=losses.Reduction.SUM_OVER_BATCH_SIZE),
            losses.log_loss(soft, tf.sigmoid(x), weights, reduction=losses.Reduction.MEAN)]


def _sequence_loss(tf, x, p):
    """``tf.contrib.seq2seq.sequence_loss``: the sparse softmax cross entropy of [batch, time, vocab]
    logits with the mask of ``tf.sequence_mask``, averaged over time and batch (and per step)."""
    logits = tf.reshape(x, [2, 4, 5]) + p(1, (5,))
    targets = tf.constant([[0, 1, 2, 3], [4, 3, 2, 1]])
    mask = tf.sequence_mask(tf.constant([3, 1]), 4, dtype=tf.float32)
    ce = tf.reshape(tf.compat.v1.nn.sparse_softmax_cross_entropy_with_logits(
        labels=tf.reshape(targets, [-1]), logits=tf.reshape(logits, [-1, 5])), [2, 4]) * mask
    per_step = tf.reduce_sum(ce, 0) / (tf.reduce_sum(mask, 0) + 1e-12)
    return [tf.reduce_sum(ce) / tf.reduce_sum(mask), per_step, tf.reduce_sum(ce, 1)]


def _layers(tf, x, p):
    """``tf.compat.v1.layers`` (they need tf_keras): their variables are differentiated, then frozen."""
    layers = tf.compat.v1.layers
    h = layers.conv2d(x, 4, 3, padding="same", activation=tf.nn.relu)
    trained, inferred = layers.batch_normalization(h, training=True), layers.batch_normalization(h, training=False)
    pooled = layers.max_pooling2d(trained + inferred, 2, 2)
    return [layers.dense(layers.flatten(pooled), 5), layers.average_pooling2d(h, 3, 1), trained, inferred]


CASES = {
    "images": Case(_images, (2, 6, 6, 3)),
    "activations": Case(_activations, (4, 5), tol=1e-5),
    "losses": Case(_losses, (4, 5)),
    "sequence_loss": Case(_sequence_loss, (8, 5), eager=True),
    "layers": Case(_layers, (2, 6, 6, 3)),
}


def _needs(name: str) -> None:
    if name == "layers":  # TF1's layers live in tf_keras (tests/conftest.py sets TF_USE_LEGACY_KERAS)
        pytest.importorskip("tf_keras")


@pytest.fixture(scope="module")
def built() -> dict[str, Built]:
    pytest.importorskip("tensorflow")
    return {name: build(case, 100 + seed) for seed, (name, case) in enumerate(CASES.items())
            if name != "layers" or importlib.util.find_spec("tf_keras") is not None}


@pytest.mark.parametrize("name", CASES)
def test_outputs_and_tf_gradients_match_session_run(built, name):
    _needs(name)
    check_session(built[name], CASES[name])


@pytest.mark.parametrize("name", CASES)
def test_jax_grad_of_the_import_matches_tf_gradients(built, name):
    _needs(name)
    check_jax_grad(built[name], CASES[name])


def test_random_functions_are_refused_by_op_type_naming_the_nodes():
    tf = pytest.importorskip("tensorflow")
    from tests.helpers.tfgraph import k_graph

    with k_graph() as g:
        x = tf.compat.v1.placeholder(tf.float32, (4, 5), name="x")
        dropped = tf.compat.v1.nn.dropout(x, rate=0.5, name="drop")
        sampled = tf.compat.v1.nn.sampled_softmax_loss(
            tf.ones([10, 5]), tf.zeros([10]), tf.constant([[1], [2], [3], [4]], tf.int64), x, 3, 10, name="sampled")
    with pytest.raises(errors.UnimplementedError) as info:
        jta.import_graph_def(g.as_graph_def(), inputs=["x:0"], outputs=[dropped.name, sampled.name])
    text = str(info.value)
    for op in ("RandomUniform", "LogUniformCandidateSampler"):
        node = next(o.name for o in g.get_operations() if o.type == op)
        assert f"op type {op} (1 node: {node})" in text, text


# the op types of jta.graph_import._ops_nn this file runs (tests/test_graph_ops_nn.py runs the others)
ADDED = {"DepthToSpace", "DivNoNan", "DynamicPartition", "InTopK", "InTopKV2", "LeakyRelu", "LeakyReluGrad", "Selu",
         "SeluGrad", "SoftplusGrad", "Softsign", "SoftsignGrad", "SpaceToDepth"}


def test_the_deterministic_functions_are_all_supported(built):
    from jta.graph_import import supported_ops

    for name, b in built.items():
        assert b.op_types <= set(supported_ops()), f"{name}: {sorted(b.op_types - set(supported_ops()))}"
    seen = set().union(*(b.op_types for b in built.values()))
    assert ADDED <= seen, sorted(ADDED - seen)
