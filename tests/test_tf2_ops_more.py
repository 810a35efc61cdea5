"""More op types of ``jta.import_function``, against TensorFlow: ``ListDiff`` (the gradient of
``tf.reduce_prod``), ``Roll``, the sorted ``Segment*`` reductions, ``CumulativeLogsumexp``,
``tf.print`` (``PrintV2``/``StringFormat``), ``tf.gather`` / ``tf.gather_nd``
with ``batch_dims``, the refusal of a TensorList of resource handles (``tf.vectorized_map``'s
fallback loop), ``DynamicPartition``/``DynamicStitch`` and ``RaggedTensorToTensor`` (``Bincount``) of
run-time sizes (eager, ``jta.checked``), and the params keys of Keras 3 variables (their paths).

Each program is compared with TensorFlow's own call eagerly and under ``jax.jit``; where it is
differentiable, ``jax.grad`` of the imported function matches a ``GradientTape`` gradient, and a
train step (the tape inside the ``tf.function``) imports and matches too.
"""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np
import pytest

tf = pytest.importorskip("tensorflow")

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402

import jta  # noqa: E402
from jta.graph_import import supported_ops, supported_tf2_ops  # noqa: E402
from jta.graph_import._messages import GraphError  # noqa: E402
from tests.helpers.compare import assert_same_outcome, outcome  # noqa: E402

RNG = np.random.default_rng(0)
NEW_OPS = ("ListDiff", "Roll", "SegmentSum", "SegmentMax", "SegmentMin", "SegmentMean", "SegmentProd",
           "CumulativeLogsumexp", "PrintV2", "StringFormat", "Print", "DynamicPartition", "DynamicStitch",
           "ParallelDynamicStitch", "RaggedTensorToTensor", "Bincount", "DenseBincount")


def _normal(*shape: int) -> np.ndarray:
    return RNG.normal(size=shape).astype(np.float32)


def _close(got: Any, want: Any) -> None:
    leaves, ref = jax.tree_util.tree_leaves(got), [np.asarray(x) for x in tf.nest.flatten(want)]
    assert len(leaves) == len(ref)
    for a, b in zip(leaves, ref, strict=True):
        a = np.asarray(a)
        assert a.shape == b.shape, (a.shape, b.shape)
        assert a.dtype == b.dtype or np.issubdtype(b.dtype, np.integer), (a.dtype, b.dtype)
        np.testing.assert_allclose(a, b, rtol=2e-5, atol=2e-5)


def _spec(a: np.ndarray) -> Any:
    return tf.TensorSpec(a.shape, tf.as_dtype(a.dtype))


def _check(build: Any, *args: np.ndarray, grad: bool = True) -> None:
    """``build``'s tf.function against TF eagerly and under jit; with ``grad``, ``jax.grad`` of the
    weighted sum of its first output with respect to the first argument against the tape's."""
    f = tf.function(build, input_signature=[_spec(a) for a in args])
    want = f(*args)
    fn, params = jta.import_function(f, *args)
    _close(fn(params, *args), want)
    _close(jax.jit(fn)(params, *args), want)
    if not grad:
        return
    out0 = tf.nest.flatten(want)[0]
    w = _normal(*out0.shape)
    x0 = tf.constant(args[0])
    with tf.GradientTape() as tape:
        tape.watch(x0)
        loss = tf.reduce_sum(w * tf.nest.flatten(build(x0, *args[1:]))[0])
    tf_grad = tf.convert_to_tensor(tape.gradient(loss, x0))  # (an IndexedSlices of a gather)

    def loss_fn(x: Any) -> Any:
        return jnp.sum(w * jax.tree_util.tree_leaves(fn(params, x, *args[1:]))[0])
    _close(jax.jit(jax.grad(loss_fn))(jnp.asarray(args[0])), tf_grad)


def _train_step(forward: Any, value: np.ndarray, *args: np.ndarray) -> None:
    """A train step (``GradientTape`` inside the ``tf.function``) of ``sum(forward(v, *args)**2)`` for
    a variable ``v``: the loss and the tape's gradient, against TF under jit."""
    v = tf.Variable(value, name="v")

    @tf.function(input_signature=[_spec(a) for a in args])
    def step(*xs: Any) -> Any:
        with tf.GradientTape() as tape:
            loss = tf.reduce_sum(forward(v, *xs) ** 2)
        return loss, tape.gradient(loss, v)

    fn, params = jta.import_function(step, *args)
    _close(jax.jit(fn)(params, *args), step(*args))


def test_the_new_op_types_are_registered():
    assert set(NEW_OPS) <= set(supported_tf2_ops())
    assert set(NEW_OPS) <= set(supported_ops())


# -- ListDiff: the gradient of tf.reduce_prod -----------------------------------------------------
@pytest.mark.parametrize("dims", [(3,), (2, 3)])
def test_reduce_prod_train_step(dims):
    value = (_normal(*dims) + 2).astype(np.float32)
    _train_step(lambda v, x: tf.reduce_prod(x * v, axis=-1), value, _normal(*dims))


def test_reduce_prod_train_step_with_an_unknown_batch():
    v = tf.Variable(_normal(3), name="v")

    @tf.function(input_signature=[tf.TensorSpec([None, 3], tf.float32)])
    def step(x: Any) -> Any:
        with tf.GradientTape() as tape:
            loss = tf.reduce_sum(tf.reduce_prod(x * v, axis=0))
        return loss, tape.gradient(loss, v)

    x = _normal(4, 3)
    fn, params = jta.import_function(step, x)
    _close(jax.jit(fn)(params, x), step(x))


def test_list_diff_runs_on_concrete_values_and_is_refused_on_traced_ones():
    x, y = np.array([1, 4, 2, 4, 7, 3], np.int32), np.array([4, 3], np.int32)

    def build(a: Any, b: Any) -> Any:
        out, idx = tf.compat.v1.setdiff1d(a, b)
        return out, idx

    f = tf.function(build, input_signature=[_spec(x), _spec(y)])
    fn, params = jta.import_function(f, x, y)
    _close(fn(params, x, y), f(x, y))
    with pytest.raises(jta.errors.UnimplementedError, match="ListDiff.*must be static") as info:
        jax.jit(fn)(params, x, y)
    assert GraphError.NOT_STATIC.matches(info.value)


# -- Roll -----------------------------------------------------------------------------------------
def test_sort_and_argsort_tie_negative_and_positive_zero():
    """TensorFlow compares -0.0 equal to 0.0 (a stable sort keeps them in index order); XLA's sort
    orders -0.0 first, which swapped them in ascending sorts (``top_k`` of the negated values)."""
    x = np.array([-1.5, 0.2, 0.2, 1.1, -0.4, -0.2], np.float32)  # rounded: -2, 0, 0, 1, -0, -0

    def build(x: Any) -> Any:
        q = tf.round(x)
        return tf.argsort(q), tf.argsort(q, direction="DESCENDING"), 1.0 / tf.sort(q), tf.math.top_k(-q, 4).indices
    _check(build, x, grad=False)


VALUE_SHAPES = {
    "tile": lambda x, n: tf.tile(x, [n]) * 2.0,
    "repeat": lambda x, n: tf.repeat(x, tf.stack([n, 1, 2])),
    "fill": lambda x, n: tf.fill([n], 1.0) * tf.reduce_sum(x),
    "zeros": lambda x, n: tf.zeros([n, 2]) + x[0],
    "broadcast_to": lambda x, n: tf.broadcast_to(x, [n, 3]),
    "reshape": lambda x, n: tf.reshape(tf.tile(x, [2]), [n, -1]),
    "ragged_sum": lambda x, n: tf.reduce_sum(tf.RaggedTensor.from_row_lengths(x, tf.stack([n, 3 - n])), 1),
}


@pytest.mark.parametrize("name", [n if n in ("tile", "reshape") else pytest.param(
    n, marks=pytest.mark.long_only) for n in VALUE_SHAPES])
def test_shapes_an_argument_decides(name):
    """Ops whose output's shape is an argument's value (``tf.tile(x, [n])``, ``tf.fill``, ``tf.zeros``,
    ``tf.broadcast_to``, ``tf.reshape``, ``tf.repeat`` and a ragged reduction, built on them) were
    refused even eagerly: an eager call runs them, ``jta.checked`` learns the value (and recompiles
    for another), a bare ``jit`` refuses them naming it, and ``jax.grad`` under ``jta.checked`` is the
    tape's (for three of them)."""
    x = np.array([1.0, 2.0, 3.0], np.float32)
    f = tf.function(VALUE_SHAPES[name], input_signature=[_spec(x), tf.TensorSpec([], tf.int32)])
    fn, params = jta.import_function(f, x, np.int32(1))
    checked = jta.checked(jax.jit(fn))
    for n in (np.int32(2), np.int32(1)):
        _close(fn(params, x, n), f(x, n))
        _close(checked(params, x, n), f(x, n))
    with pytest.raises(jta.errors.UnimplementedError, match="jta.checked learns it at run time"):
        jax.jit(fn)(params, x, np.int32(2))
    if name not in ("tile", "reshape", "broadcast_to"):
        return
    x0 = tf.constant(x)
    with tf.GradientTape() as tape:
        tape.watch(x0)
        loss = tf.reduce_sum(f(x0, 2) ** 2)
    grad = jta.checked(jax.jit(jax.grad(lambda v: jnp.sum(fn(params, v, np.int32(2)) ** 2))))
    _close(grad(x), tape.gradient(loss, x0))


@pytest.mark.long_only  # (4 s; learned sizes: tests/test_tf2_import.py keeps the class)
def test_a_size_computed_from_another_is_learned_under_checked():
    """A ragged mean's train step: the row ids come from a ``Where`` of a ``Range`` whose rows the data
    decides, so a probe that guesses the ``Range`` computes the ``Where``'s count wrong (0). jta.checked
    then probes the sizes one by one, each from right ones, where its trace failed with a false shape
    error."""
    w = tf.Variable(np.array([0.5, -1.0], np.float32), name="w")
    values = np.arange(14, dtype=np.float32).reshape(7, 2) % 5

    @tf.function(input_signature=[_spec(values), tf.TensorSpec([3], tf.int64)])
    def train(v: Any, lengths: Any) -> Any:
        with tf.GradientTape() as tape:
            loss = tf.reduce_sum(tf.reduce_mean(tf.RaggedTensor.from_row_lengths(v * w, lengths), axis=1) ** 2)
        return loss, tape.gradient(loss, w)

    step, params = jta.import_function(train, values, np.array([3, 1, 3], np.int64))
    lengths = np.array([2, 4, 1], np.int64)
    _close(jta.checked(jax.jit(step))(params, values, lengths), train(values, lengths))


@pytest.mark.parametrize("dtype", [np.float32, np.int32])
def test_max_and_min_of_nothing_are_their_identities(dtype):
    """``reduce_max``/``reduce_min`` over an empty axis give TensorFlow's identities (``-inf``/``inf``,
    the integer extremes), where NumPy and JAX raise."""
    _check(lambda x: (tf.reduce_max(x, 0), tf.reduce_min(x, 0), tf.reduce_max(x)), np.zeros((0, 2), dtype), grad=False)


def test_roll_static_shift():
    _check(lambda x: tf.roll(x, shift=2, axis=1) * x, _normal(2, 5))


def test_roll_several_axes_repeated_axis_and_negative_shift():
    _check(lambda x: tf.roll(x, shift=[1, -3, 2], axis=[0, 1, 1]), _normal(3, 4))


def test_roll_traced_shift():
    shift = np.array(3, np.int32)
    _check(lambda x, s: tf.roll(x, shift=s, axis=0) + x, _normal(5), shift)
    _check(lambda x, s: tf.roll(x, shift=s, axis=[1, 0]), _normal(2, 3), np.array([-1, 5], np.int32))


def test_roll_in_a_loop_with_a_loop_dependent_shift_train_step():
    def forward(v: Any, x: Any) -> Any:
        h = x
        for i in tf.range(3):
            h = tf.tanh(tf.roll(h, shift=i, axis=0) * v)
        return h
    _train_step(forward, _normal(5), _normal(5))


# -- sorted segment reductions ----------------------------------------------------------------
SEGMENTS = ("segment_sum", "segment_max", "segment_min", "segment_mean", "segment_prod")


@pytest.mark.parametrize("name", SEGMENTS)
def test_segment_reduction_with_constant_ids(name):
    ids = [0, 0, 2, 2, 2, 3]  # segment 1 is empty
    _check(lambda x: getattr(tf.math, name)(x, ids), _normal(6, 2))


def test_segment_prod_with_zeros():
    x = _normal(5, 2)
    x[0, 0] = x[3, 1] = x[4, 1] = 0
    _check(lambda a: tf.math.segment_prod(a, [0, 0, 1, 1, 1]), x)


def test_unsorted_segment_prod_gradient_with_repeated_constant_ids():
    x = _normal(5, 2)
    x[1, 0] = 0
    _check(lambda a: tf.math.unsorted_segment_prod(a, [2, 0, 2, -1, 0], num_segments=4), x)


def test_segment_reductions_of_integers():
    x = np.array([[5, -7], [2, 4], [-3, 3]], np.int32)
    for name in SEGMENTS:
        _check(lambda a, name=name: getattr(tf.math, name)(a, [0, 0, 2]), x, grad=False)


@pytest.mark.parametrize("name", ["segment_max", *(pytest.param(n, marks=pytest.mark.long_only)
                                                  for n in ("segment_sum", "segment_mean"))])
def test_segment_reduction_train_step_in_a_loop(name):
    def forward(v: Any, x: Any) -> Any:
        h = x
        for _ in tf.range(2):
            h = tf.tanh(h * v + tf.gather(getattr(tf.math, name)(h, [0, 0, 1, 1, 1]), [0, 0, 1, 1, 1]))
        return h
    _train_step(forward, _normal(5, 2), _normal(5, 2))


def test_segment_ids_run_concrete_and_are_refused_traced():
    x, ids = _normal(4, 2), np.array([0, 1, 1, 3], np.int32)
    f = tf.function(tf.math.segment_sum, input_signature=[_spec(x), _spec(ids)])
    fn, params = jta.import_function(f, x, ids)
    _close(fn(params, x, ids), f(x, ids))
    with pytest.raises(jta.errors.UnimplementedError, match="segment_ids.*must be static") as info:
        jax.jit(fn)(params, x, ids)
    assert GraphError.NOT_STATIC.matches(info.value)


# -- CumulativeLogsumexp ------------------------------------------------------------------------
@pytest.mark.parametrize("exclusive", [False, True])
@pytest.mark.parametrize("reverse", [False, True])
def test_cumulative_logsumexp(exclusive, reverse):
    _check(lambda x: tf.math.cumulative_logsumexp(x, axis=1, exclusive=exclusive, reverse=reverse), _normal(2, 4))


def test_cumulative_logsumexp_of_a_constant_stays_static():
    c = np.arange(4, dtype=np.float32)
    _check(lambda x: x * tf.math.cumulative_logsumexp(tf.constant(c), exclusive=True)[1:], _normal(3))


# -- tf.print: a no-op, with a warning ------------------------------------------------------------
@pytest.mark.long_only  # (3 s; test_v1_print_passes_its_input_through keeps the class)
def test_print_in_a_loop_is_a_no_op():
    def forward(v: Any, x: Any) -> Any:
        for i in tf.range(3):
            tf.print("step", i, x, output_stream="file:///dev/null")
            x = tf.tanh(x * v)
        return x
    _check(lambda x: forward(tf.constant(np.float32(0.5)), x), _normal(4))
    _train_step(forward, _normal(4), _normal(4))


def test_v1_print_passes_its_input_through():
    _check(lambda x: tf.compat.v1.Print(x, [x], message="x") * 2, _normal(3))


def test_an_import_of_a_function_that_prints_does_not_warn(tmp_path):
    out = tmp_path / "printed.txt"
    f = tf.function(lambda x: (tf.print("x", x, output_stream=f"file://{out}"), x * 2)[1],
                    input_signature=[tf.TensorSpec([3], tf.float32)])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        fn, params = jta.import_function(f, _normal(3))
    np.testing.assert_array_equal(fn(params, np.ones(3, np.float32)), 2 * np.ones(3, np.float32))
    assert out.read_text() == "x [1 1 1]\n"  # (tests/test_tf2_print.py compares the texts with TensorFlow's)


# -- gathers with batch_dims ------------------------------------------------------------------
@pytest.mark.parametrize("batch_dims,axis", [(0, 0), (0, 2), (1, 1), (1, 2), (1, 3), (2, 2), (2, 3), (-1, 2),
                                             (-1, -1)])
def test_gather_batch_dims(batch_dims, axis):
    params = _normal(2, 3, 4, 5)
    shape = {0: (3, 2), 1: (2, 3), 2: (2, 3, 2)}[batch_dims if batch_dims >= 0 else 2]
    indices = RNG.integers(0, params.shape[axis], size=shape).astype(np.int32)
    _check(lambda p, i: tf.gather(p, i, axis=axis, batch_dims=batch_dims), params, indices)


def test_gather_batch_dims_equal_to_the_indices_rank():
    _check(lambda p, i: tf.gather(p, i, axis=2, batch_dims=1), _normal(2, 3, 4), np.array([3, 1], np.int32))


def test_gather_batch_dims_of_a_variable_train_step():
    idx = np.array([[0, 3, 3], [2, 1, 0]], np.int32)
    _train_step(lambda v, i: tf.tanh(tf.gather(v, i, batch_dims=1)), _normal(2, 4, 3), idx)


@pytest.mark.long_only  # (2 s; test_gather_nd_batch_dims_attribute keeps the class)
def test_gather_nd_batch_dims():
    params = _normal(2, 3, 4)
    indices = np.array([[[0, 1], [2, 3]], [[1, 0], [0, 0]]], np.int32)
    _check(lambda p, i: tf.gather_nd(p, i, batch_dims=1), params, indices)
    _check(lambda p, i: tf.gather_nd(p, i[..., :1], batch_dims=1), params, indices)


def test_gather_nd_batch_dims_attribute():
    """This TensorFlow's ``tf.gather_nd(batch_dims=1)`` composes ``GatherNd`` ops of ``batch_dims=0``;
    newer graphs carry the attribute: the op's function against TF's values."""
    from jta.graph_import._nodes import Node
    from jta.graph_import._ops import OPS
    params = _normal(2, 3, 4)
    indices = np.array([[[0, 1], [2, 3]], [[1, 0], [0, 0]]], np.int32)
    for k in (1, 2):
        node = Node("g", "GatherNd", (), (), {"batch_dims": 1})
        want = tf.gather_nd(params, indices[..., :k], batch_dims=1)
        _close(OPS["GatherNd"](node, [params, indices[..., :k]]), want)
        _close(jax.jit(lambda p, i, node=node: OPS["GatherNd"](node, [p, i]))(params, indices[..., :k]), want)


# -- tf.vectorized_map's fallback loop: refused clearly -----------------------------------------
def test_vectorized_map_fallback_with_a_variable_is_refused_clearly():
    w = tf.Variable(_normal(3), name="w")

    @tf.function(input_signature=[tf.TensorSpec([4, 3], tf.float32)])
    def f(x: Any) -> Any:
        def g(a: Any) -> Any:
            return tf.while_loop(lambda i, v: i < 3, lambda i, v: (i + 1, v * w + a), (0, a))[1]
        return tf.vectorized_map(g, x)

    x = _normal(4, 3)
    fn, params = jta.import_function(f, x)
    with pytest.raises(jta.errors.UnimplementedError, match="element dtype resource.*vectorized_map") as info:
        fn(params, x)
    assert GraphError.TF2_UNSUPPORTED.matches(info.value)
    assert "tf.map_fn" in str(info.value)


# -- DynamicPartition and DynamicStitch: row counts the data decides ------------------------------
def _partition_stitch(v: Any, x: Any, p: Any) -> Any:
    """The redteam program: partition ``x * v`` by ``p``, change each part, stitch them back."""
    a, b, c = tf.dynamic_partition(x * v, p, 3)
    ids = tf.dynamic_partition(tf.reshape(tf.range(tf.size(p)), tf.shape(p)), p, 3)
    return tf.dynamic_stitch(ids, [a * 2.0, b - 1.0, tf.tanh(c)]), tf.reduce_sum(a) + tf.reduce_sum(c ** 2)


PARTITIONS = np.array([[0, 2, 2], [0, 0, 2]], np.int32)  # partition 1 empty


@pytest.mark.long_only
def test_dynamic_partition_and_stitch_of_an_argument():
    """Eagerly the partitions are concrete: TF's shapes and values; under a bare jit they are refused
    (code 405, naming jta.checked); under jta.checked the row counts are learned: the forward, jax.grad
    and the tape's train step (DynamicPartition's gradient stitches) match TF."""
    v = tf.Variable(_normal(2, 3, 2), name="v")
    x = _normal(2, 3, 2)
    f = tf.function(lambda x, p: _partition_stitch(v, x, p), input_signature=[_spec(x), _spec(PARTITIONS)])

    @tf.function(input_signature=[_spec(x), _spec(PARTITIONS)])
    def step(x: Any, p: Any) -> Any:
        with tf.GradientTape() as tape:
            tape.watch(x)
            y, s = _partition_stitch(v, x, p)
            loss = tf.reduce_sum(y ** 2) + s
        return loss, tape.gradient(loss, [v, x])

    fn, params = jta.import_function(f, x, PARTITIONS)
    train, train_params = jta.import_function(step, x, PARTITIONS)

    def loss(ps: Any, xs: Any, p: Any) -> Any:
        y, s = fn(ps, xs, p)
        return jnp.sum(y ** 2) + s
    checked_fn, checked_train = jta.checked(jax.jit(fn)), jta.checked(jax.jit(train))
    checked_grad = jta.checked(jax.jit(jax.grad(loss, argnums=(0, 1))))
    for k, p in enumerate((PARTITIONS, np.array([[1, 1, 0], [2, 1, 1]], np.int32))):  # (checked learns them again)
        want, want_step = f(x, p), step(x, p)
        want_grad = ({"v": want_step[1][0]}, want_step[1][1])
        _close(fn(params, x, p), want)
        _close(checked_fn(params, x, p), want)
        _close(train(train_params, x, p), want_step)
        _close(jax.grad(loss, argnums=(0, 1))(params, x, p), want_grad)
        if k == 0:
            _close(checked_train(train_params, x, p), want_step)
            _close(checked_grad(params, x, p), want_grad)
    with pytest.raises(jta.errors.UnimplementedError, match="DynamicPartition.*jta.checked learns") as info:
        jax.jit(fn)(params, x, PARTITIONS)
    assert GraphError.NOT_STATIC.matches(info.value)


@pytest.mark.parametrize("mode", ["eager", "checked"])
def test_partitions_out_of_range_and_negative_counts_fail_as_in_tensorflow(mode: str) -> None:
    """A partition id outside [0, num_partitions), a negative bincount entry and a negative stitch index
    are TensorFlow's errors, class and text (codes 449, 450, 451), eagerly and from compiled code under
    jta.checked, never dropped."""
    x = _normal(2, 2)
    cases = [(lambda x, p: tf.dynamic_partition(x, p, 2)[0], np.array([[0, 1], [5, 1]], np.int32)),
             (lambda x, p: tf.dynamic_partition(tf.reshape(x, [-1]), p, 2)[1], np.array([0, 1, -1, 1], np.int32)),
             (lambda x, p: tf.cast(tf.math.bincount(p), tf.float32) * x[0, 0], np.array([0, -1, 2], np.int32)),
             (lambda x, p: tf.dynamic_stitch([tf.constant([0, 1]), p], [x[0], x[1]]), np.array([2, -1], np.int32))]
    for f, p in cases:
        f = tf.function(f, input_signature=[_spec(x), _spec(p)])
        with pytest.raises(tf.errors.InvalidArgumentError) as want:
            f(x, p)
        fn, params = jta.import_function(f, x, np.zeros_like(p))
        run = fn if mode == "eager" else jta.checked(jax.jit(fn))
        with pytest.raises(jta.errors.InvalidArgumentError) as got:
            run(params, x, p)
        text = str(want.value.message).split("}} ")[-1].split(" [Op:")[0].split("\n\t [[")[0]
        assert str(got.value).endswith(text)  # (rank 2: compiled code names [1,0] too, not the flat [2])


def test_dynamic_partition_of_constant_partitions_runs_under_jit():
    _check(lambda x: tf.dynamic_partition(x, [[1, 0], [1, 1]], 2), _normal(2, 2, 3))
    _train_step(lambda v, x: tf.dynamic_partition(v * x, [2, 0, 2, 1], 3)[2], _normal(4), _normal(4))


def test_dynamic_stitch_later_rows_win_and_gaps_are_zeros():
    """A repeated index takes the later row (TensorFlow's rule); an index no row names gives zeros.
    TensorFlow's gradient gathers the output's gradient at every index, overwritten rows too: so do
    ``jax.grad`` and an imported train step."""
    i0, i1 = np.array([0, 4, 2], np.int32), np.array([[2, 5], [0, 7]], np.int32)

    def build(a: Any, b: Any, j0: Any, j1: Any) -> Any:
        return tf.dynamic_stitch([j0, j1], [a, b])

    args = (_normal(3, 2), _normal(2, 2, 2), i0, i1)
    f = tf.function(build, input_signature=[_spec(a) for a in args])
    fn, params = jta.import_function(f, *args)
    want = f(*args)
    _close(fn(params, *args), want)
    _close(jta.checked(jax.jit(fn))(params, *args), want)
    with pytest.raises(jta.errors.UnimplementedError, match="DynamicStitch.*indices.*jta.checked") as info:
        jax.jit(fn)(params, *args)
    assert GraphError.NOT_STATIC.matches(info.value)
    w = _normal(8, 2)
    grad = jax.grad(lambda a: jnp.sum(w * fn(params, a, *args[1:])))(args[0])
    _close(grad, w[i0])  # (rows 0 and 2 were overwritten by b's)
    _train_step(lambda v, b: tf.dynamic_stitch([i0, i1], [v, b]), args[0], args[1])  # TF's gradient
    _check(lambda a, b: tf.dynamic_stitch([i0, i1 + 1], [a, b]), *args[:2])  # distinct constant indices, a gap


# -- RaggedTensorToTensor: RaggedTensor.to_tensor -------------------------------------------------
def _ragged_check(build: Any, *args: np.ndarray, static: bool) -> None:
    """``build``'s tf.function against TF eagerly, under jta.checked (with ``static``: under a bare jit
    too; without, a bare jit refuses, naming jta.checked) and jax.grad with respect to the values (the
    first argument) against the tape's, eagerly and under jta.checked."""
    f = tf.function(build, input_signature=[_spec(a) for a in args])
    want = f(*args)
    fn, params = jta.import_function(f, *args)
    _close(fn(params, *args), want)
    _close(jta.checked(jax.jit(fn))(params, *args), want)
    if static:
        _close(jax.jit(fn)(params, *args), want)
    else:
        with pytest.raises(jta.errors.UnimplementedError, match="jta.checked learns") as info:
            jax.jit(fn)(params, *args)
        assert GraphError.NOT_STATIC.matches(info.value)
    x0 = tf.constant(args[0])
    with tf.GradientTape() as tape:
        tape.watch(x0)
        loss = tf.reduce_sum(tf.sin(build(x0, *args[1:])) ** 2)
    want_grad = tf.convert_to_tensor(tape.gradient(loss, x0))  # (an IndexedSlices)

    def loss_fn(x: Any, *rest: Any) -> Any:
        return jnp.sum(jnp.sin(fn(params, x, *rest)) ** 2)
    _close(jax.grad(loss_fn)(args[0], *args[1:]), want_grad)
    _close(jta.checked(jax.jit(jax.grad(loss_fn)))(args[0], *args[1:]), want_grad)


ROW_LENGTHS = np.array([3, 0, 4], np.int64)


def test_ragged_to_tensor_from_row_lengths():
    _ragged_check(lambda v, n: tf.RaggedTensor.from_row_lengths(v, n).to_tensor(default_value=-1.0),
                  _normal(7, 2), ROW_LENGTHS, static=False)


@pytest.mark.parametrize("shape", [[None, 6, None], *(pytest.param(s, marks=pytest.mark.long_only)
                                                    for s in ([4, 5, 2], [2, 2, 2]))])
def test_ragged_to_tensor_with_a_shape_pads_and_truncates(shape):
    _ragged_check(lambda v, n: tf.RaggedTensor.from_row_lengths(v, n).to_tensor(default_value=[7.0, 8.0],
                                                                                 shape=shape),
                  _normal(7, 2), ROW_LENGTHS, static=True)


def test_ragged_to_tensor_of_constant_row_lengths_runs_under_jit():
    _check(lambda v: tf.RaggedTensor.from_row_lengths(v, [1, 3, 0, 2]).to_tensor() * 2.0, _normal(6, 3))


def test_shape_arithmetic_through_ops_of_jax_code_stays_static():
    """``take_along_axis`` builds its shapes with ``TensorScatterUpdate`` of constants (an op computed
    with JAX): folded while tracing, as TensorFlow folds constants, they stay static, so ``BroadcastTo``
    runs under ``jit`` (it was refused as depending on the inputs' values)."""
    _check(lambda a: tf.experimental.numpy.take_along_axis(a, tf.argsort(a, 1), 1) * 2.0, _normal(4, 5))


@pytest.mark.long_only  # (2 s; tests/test_tf2_import.py keeps learned sizes by default)
def test_values_that_decide_shapes_are_learned_under_checked():
    """``unsorted_segment_sum(..., num_segments=max(ids) + 1)`` (the segment softmax idiom) and a cond whose
    branches give different shapes (``x[:2]`` or ``x[:3]``), and its train step: a bare jit refuses them,
    naming ``jta.checked``, which learns the count and the branch at run time (each value its compilation)."""
    seg = tf.function(lambda x, i: tf.math.unsorted_segment_sum(x, i, tf.reduce_max(i) + 1),
                      input_signature=[tf.TensorSpec([6], tf.float32), tf.TensorSpec([6], tf.int32)])
    cond = tf.function(lambda x: tf.cond(tf.reduce_sum(x) > 0, lambda: x[:2] * 2.0, lambda: x[:3]),
                       input_signature=[tf.TensorSpec([4], tf.float32)])
    w = tf.Variable(np.array([0.5, -1.0, 2.0, 0.3], np.float32), name="w")

    @tf.function(input_signature=[tf.TensorSpec([4], tf.float32)])
    def train(x: Any) -> Any:  # (the gradient's cond reads the forward's predicate: it takes the same branch)
        with tf.GradientTape() as tape:
            y = tf.cond(tf.reduce_sum(x * w) > 0, lambda: x[:2] * w[:2], lambda: x[:3] * w[:3])
            loss = tf.reduce_sum(tf.square(y))
        return loss, tape.gradient(loss, w)

    x = np.arange(6, dtype=np.float32) - 2.0
    for f, runs in ((seg, [(x, np.array([0, 2, 1, 0, 2, 2], np.int32)), (x, np.array([3, 0, 0, 1, 1, 1], np.int32))]),
                    (cond, [(x[:4],), (-x[:4],), (x[:4],)]), (train, [(x[2:],), (-x[2:],)])):
        fn, params = jta.import_function(f, *runs[0])
        with pytest.raises(jta.errors.UnimplementedError, match="jta.checked"):
            jax.jit(fn)(params, *runs[0])
        checked = jta.checked(jax.jit(fn))
        for args in runs:
            _close(checked(params, *args), f(*args))


@pytest.mark.parametrize("splits", [[0, 0, 3], [0, 3, 2], pytest.param([1, 2, 3], marks=pytest.mark.long_only),
                                    pytest.param([0, -1, 3], marks=pytest.mark.long_only)])
def test_ragged_row_splits_are_checked_as_in_tensorflow(splits):
    """The rows a ``ROW_SPLITS`` partition places add up to its last split (TensorFlow's check: splits
    start at 0 and never decrease): else TensorFlow's error, eagerly and from compiled code (code 483)."""
    f = tf.function(lambda s: tf.raw_ops.RaggedTensorToTensor(
        shape=[-1, -1], values=tf.constant([1.0, 2.0, 3.0]), default_value=0.0, row_partition_tensors=[s],
        row_partition_types=["ROW_SPLITS"]), input_signature=[tf.TensorSpec([3], tf.int64)])
    s = np.array(splits, np.int64)
    fn, params = jta.import_function(f, s)
    for run in (fn, jta.checked(jax.jit(fn))):
        assert_same_outcome(outcome(run, params, s), outcome(f, s))


@pytest.mark.long_only
def test_ragged_to_tensor_from_value_rowids_and_nested_row_lengths():
    rowids = np.array([0, 0, 2, 2, 2, 3, 3], np.int64)
    _ragged_check(lambda v, r: tf.RaggedTensor.from_value_rowids(v, r, nrows=5).to_tensor(default_value=0.5),
                  _normal(7), rowids, static=False)
    # (from_value_rowids counts the rows with tf.math.bincount, whose size a bare jit does not know)
    _ragged_check(lambda v, r: tf.RaggedTensor.from_value_rowids(v, r, nrows=4).to_tensor(shape=[None, 2]),
                  _normal(7), rowids, static=False)
    _ragged_check(lambda v, a, b: tf.RaggedTensor.from_nested_row_lengths(v, [a, b]).to_tensor(),
                  _normal(7, 2), np.array([2, 0, 1], np.int32), np.array([3, 0, 4], np.int32), static=False)


@pytest.mark.long_only  # (about 8 s; the op itself is covered by the lighter tests above)
def test_ragged_input_of_a_keras_lstm_train_step():
    """The redteam program: a tf_keras LSTM given a RaggedTensor built inside the function."""
    tf_keras = pytest.importorskip("tf_keras")
    lstm = tf_keras.layers.LSTM(3)
    values, lengths = _normal(7, 2), np.array([3, 4], np.int64)

    @tf.function(input_signature=[_spec(values), _spec(lengths)])
    def step(v: Any, n: Any) -> Any:
        with tf.GradientTape() as tape:
            loss = tf.reduce_sum(lstm(tf.RaggedTensor.from_row_lengths(v, n)) ** 2)
        return loss, tape.gradient(loss, lstm.trainable_variables)

    step(values, lengths)
    fn, params = jta.import_function(step, values, lengths)
    want = step(values, lengths)
    _close(fn(params, values, lengths), want)
    _close(jta.checked(jax.jit(fn))(params, values, lengths), want)


@pytest.mark.parametrize("binary", [False, True])
def test_bincount_of_a_constant_size(binary):
    """(TensorFlow registers no gradient for these.)"""
    ids = np.array([[0, 5, 1, 1], [2, 2, 2, 0]], np.int32)
    _check(lambda w, i: tf.raw_ops.DenseBincount(input=i, size=3, weights=w, binary_output=binary), _normal(2, 4),
           ids, grad=False)
    _check(lambda w, i: tf.raw_ops.DenseBincount(input=i[0], size=4, weights=[], binary_output=binary) * 2.0,
           np.float32(0), ids, grad=False)
    _check(lambda w, i: tf.raw_ops.Bincount(arr=i[1], size=4, weights=w[1]), _normal(2, 4), ids, grad=False)
    _check(lambda w: w * tf.raw_ops.DenseBincount(input=ids, size=3, weights=[], binary_output=binary), _normal(2, 3))
    _check(lambda w: w * tf.raw_ops.Bincount(arr=ids[0], size=6, weights=[1.0, 2.0, 3.0, 4.0]), _normal(6))


# -- params keys: a Keras 3 variable's path ------------------------------------------------------
@pytest.mark.long_only  # (3 s; test_tf2_import.py's Keras 3 LSTM keeps the path keys by default)
def test_keras3_subclassed_model_params_are_keyed_by_path():
    """A Keras 3 subclassed model's tf.Variables are named by the model's scope alone (``m/kernel``
    twice); the params keys are the Keras paths (``m/dense/kernel``), as ``model.weights`` names them."""
    keras = pytest.importorskip("keras")
    keras.utils.clear_session()  # (layer names count up per process: another test's Dense makes this one dense_2)

    class Model(keras.Model):
        def __init__(self) -> None:
            super().__init__(name="m")
            self.cell = keras.layers.GRUCell(4)
            self.out = keras.layers.Dense(2)

        def call(self, x: Any) -> Any:
            o, _ = self.cell(x[:, 0], tf.zeros([2, 4]))
            return self.out(o)

    m = Model()
    x = _normal(2, 5, 3)
    m(x)
    f = tf.function(lambda x: m(x), input_signature=[_spec(x)])
    fn, params = jta.import_function(f, x)
    assert sorted(params) == sorted(v.path for v in m.weights) == [
        "m/dense/bias", "m/dense/kernel", "m/gru_cell/bias", "m/gru_cell/kernel", "m/gru_cell/recurrent_kernel"]
    for v in m.weights:
        np.testing.assert_array_equal(params[v.path], v.numpy())
    _close(jax.jit(fn)(params, x), f(x))


def test_tf_keras_and_plain_variables_keep_their_names():
    tf_keras = pytest.importorskip("tf_keras")

    class Model(tf_keras.Model):
        def __init__(self) -> None:
            super().__init__(name="tm")
            self.out = tf_keras.layers.Dense(2)

        def call(self, x: Any) -> Any:
            return self.out(x)

    m, w = Model(), tf.Variable(_normal(2), name="scale")
    x = _normal(3, 4)
    m(x)
    f = tf.function(lambda x: m(x) * w, input_signature=[_spec(x)])
    fn, params = jta.import_function(f, x)
    assert sorted(params) == sorted([v.name.removesuffix(":0") for v in m.weights] + ["scale"])
    _close(fn(params, x), f(x))


# -- Einsum with a repeated output label: TensorFlow's gradient of a trace or a diagonal -------------
@pytest.mark.parametrize("equation, shape", [("bii->bi", (2, 3, 3)), pytest.param("ii->", (3, 3), marks=pytest.mark.long_only),
                                             pytest.param("...ii->...", (2, 3, 3), marks=pytest.mark.long_only),
                                             pytest.param("iij->j", (3, 3, 2), marks=pytest.mark.long_only)])
def test_a_train_step_through_an_einsum_diagonal(equation: str, shape: tuple[int, ...]) -> None:
    """The tape's gradient of ``einsum('bii->bi')`` is ``einsum('bi->bii')``: a repeated output label,
    whose values go on the diagonal."""
    _train_step(lambda v, x: tf.einsum(equation, v * x), _normal(*shape), _normal(*shape))


def test_an_overwritten_scatter_update_gets_tensorflows_gradient() -> None:
    """``tensor_scatter_nd_update`` at a repeated index: the later update wins, and TensorFlow's gradient
    gives every update its place's gradient (the overwritten one too), the tensor none there."""
    indices = np.array([[1], [3], [1]], np.int32)
    tensor, updates, w = _normal(5, 2), _normal(3, 2), _normal(5, 2)
    f = tf.function(lambda t, u: tf.tensor_scatter_nd_update(t, indices, u) * w,
                    input_signature=[_spec(tensor), _spec(updates)])
    fn, params = jta.import_function(f, tensor, updates)
    _close(jax.jit(fn)(params, tensor, updates), f(tensor, updates))
    got = jax.jit(jax.grad(lambda t, u: jnp.sum(fn(params, t, u)), argnums=(0, 1)))(tensor, updates)
    t, u = tf.constant(tensor), tf.constant(updates)
    with tf.GradientTape() as tape:
        tape.watch([t, u])
        loss = tf.reduce_sum(f(t, u))
    _close(list(got), tape.gradient(loss, [t, u]))


def test_a_spectral_norm_runs_under_jit() -> None:
    """``tf.norm(ord=2)`` of matrices finds its axes with a ``map_fn`` over constants and a ``ListDiff`` of
    them: the loop of constants runs while tracing, so the ``ListDiff`` has a static shape under ``jit``."""
    x = _normal(2, 3, 3)
    f = tf.function(lambda x: tf.norm(x, ord=2, axis=[-2, -1]), input_signature=[_spec(x)])
    fn, params = jta.import_function(f, x)
    np.testing.assert_allclose(jax.jit(fn)(params, x), f(x), rtol=2e-5)
    got = jax.jit(jax.grad(lambda x: jnp.sum(fn(params, x))))(x)
    xt = tf.constant(x)
    with tf.GradientTape() as tape:
        tape.watch(xt)
        loss = tf.reduce_sum(f(xt))
    np.testing.assert_allclose(got, tape.gradient(loss, xt), rtol=2e-4, atol=2e-5)


def test_unsorted_segment_prod_of_run_time_ids_differentiates_as_tensorflow() -> None:
    """Repeated run-time ids, a segment with one zero and one with two: TensorFlow's gradient (the product
    of the others through one zero, none through two), where JAX has none for repeated ids."""
    data = np.array([2.0, 0.0, 3.0, 0.0, 0.0, 1.5, -2.0], np.float32)
    ids = np.array([0, 0, 0, 1, 1, 2, 2], np.int32)
    f = tf.function(lambda d, i: tf.math.unsorted_segment_prod(d, i, 4),
                    input_signature=[_spec(data), _spec(ids)])
    fn, params = jta.import_function(f, data, ids)
    got = jax.jit(jax.grad(lambda d, i: jnp.sum(fn(params, d, i) * jnp.arange(1.0, 5.0))))(data, ids)
    d = tf.constant(data)
    with tf.GradientTape() as tape:
        tape.watch(d)
        loss = tf.reduce_sum(f(d, ids) * tf.range(1.0, 5.0))
    np.testing.assert_allclose(got, tape.gradient(loss, d), rtol=1e-6)


@pytest.mark.parametrize("shape", [(0,), (3, 0)])
def test_softmax_of_an_empty_last_axis_is_empty(shape: tuple[int, ...]) -> None:
    """TensorFlow returns the empty tensor (red-team batch 18: a max over no entries raised)."""
    _check(lambda x: (tf.nn.softmax(x), tf.nn.log_softmax(x)), np.zeros(shape, np.float32))
