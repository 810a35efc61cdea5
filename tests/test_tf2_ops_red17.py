"""Ops real TF2 programs use that the import once refused (red team 17): ``ResourceGatherNd``
(``tf.gather_nd`` of a variable: a CRF's transition scores), ``XlaDynamicSlice`` and
``XlaDynamicUpdateSlice`` (Hugging Face's TF generation: the key/value cache), ``RaggedRange``
(``tf.ragged.range``; a Keras ``Bidirectional`` layer reverses ragged rows with it).

Each is compared with TensorFlow eagerly and under ``jax.jit`` (``jta.checked`` where the data decides a
size); where TensorFlow has a gradient, ``jax.grad`` of the import against the ``GradientTape``'s and the
imported train step (the tape inside the ``tf.function``); where it has none, the tape's answer
(``LookupError``, or no gradient); bad input gives TensorFlow's class and text, eagerly and from
compiled code where the value is traced.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

tf = pytest.importorskip("tensorflow")

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
from tensorflow.compiler.tf2xla.python import xla  # noqa: E402

import jta  # noqa: E402
from tests.helpers.compare import assert_same_outcome, outcome  # noqa: E402
from tests.helpers.tf2_steps import op_types, tape_step  # noqa: E402
from tests.test_tf2_ops_extra import _check, _close, _spec  # noqa: E402

TRANS = tf.Variable(np.cos(np.arange(24, dtype=np.float32)).reshape(4, 3, 2), name="trans")


# -- ResourceGatherNd -------------------------------------------------------------------------------------
@pytest.mark.parametrize("indices", [[[0, 1], [3, 2], [0, 1]], [[2], [0], [2]], [[1, 2, 0]], [3, 1]])
def test_gather_nd_of_a_variable_is_tensorflows(indices: list[Any]) -> None:
    """Elements, rows and slices of a variable; ``jax.grad`` in the variable is the tape's (repeated
    index vectors add up: ``scatter_nd``, or ``IndexedSlices`` for ``[n, 1]`` indices), and so is the train step."""
    ids = np.array(indices, np.int32)
    f = tf.function(lambda i: tf.gather_nd(TRANS, i) * 2.0, input_signature=[_spec(ids)])
    assert "ResourceGatherNd" in op_types(f)
    want = f(ids)
    fn, params = jta.import_function(f, ids)
    _close(fn(params, ids), want, 0, 0, "eager")
    _close(jax.jit(fn)(params, ids), want, 0, 0, "jit")
    if ids.ndim == 1:  # (TensorFlow's gradient fails for one index vector: scatter_nd of rank-1 indices)
        return
    weights = np.cos(np.arange(np.size(want), dtype=np.float32)).reshape(np.shape(want))
    with tf.GradientTape() as tape:
        value = tf.reduce_sum(weights * f(ids))
    tape_grad = tf.convert_to_tensor(tape.gradient(value, TRANS)).numpy()
    (name,) = params
    got = jax.jit(jax.grad(lambda p: jnp.sum(weights * fn(p, ids))))(params)
    _close(got[name], tape_grad, 0, 0, "jax.grad")
    step = tape_step(lambda i: tf.reduce_sum(weights * tf.gather_nd(TRANS, i) * 2.0), [ids], (), [TRANS])
    jax_step, step_params = jta.import_function(step, ids)
    _close(jax.jit(jax_step)(step_params, ids), step(ids), 0, 0, "train step")


def test_crf_path_scores_in_a_loop() -> None:
    """A CRF's transition score of each tag path, summed step by step in a loop (``ResourceGatherNd`` of the
    pairs of tags); ``jax.grad`` in the transitions is the tape's, and so is the imported train step."""
    trans = tf.Variable(np.sin(np.arange(16, dtype=np.float32)).reshape(4, 4), name="transitions")
    tags = np.int32([[0, 3, 3, 1], [2, 2, 0, 3]])

    def score(t: Any) -> Any:
        total = tf.zeros([2])
        for k in tf.range(3):
            total += tf.gather_nd(trans, tf.stack([t[:, k], t[:, k + 1]], axis=1))
        return total

    f = tf.function(score, input_signature=[_spec(tags)])
    want = f(tags)
    fn, params = jta.import_function(f, tags)
    _close(fn(params, tags), want, 0, 0, "eager")
    _close(jax.jit(fn)(params, tags), want, 0, 0, "jit")
    with tf.GradientTape() as tape:
        value = tf.reduce_sum(f(tags) * [1.0, -2.0])
    got = jax.jit(jax.grad(lambda p: jnp.sum(fn(p, tags) * jnp.array([1.0, -2.0]))))(params)
    _close(got[next(iter(params))], tape.gradient(value, trans), 0, 0, "jax.grad")
    step = tape_step(lambda t: tf.reduce_sum(score(t) * [1.0, -2.0]), [tags], (), [trans])
    jax_step, step_params = jta.import_function(step, tags)
    _close(jax.jit(jax_step)(step_params, tags), step(tags), 1e-6, 1e-6, "train step")


def test_gather_nd_of_a_variable_out_of_range_is_tensorflows_error() -> None:
    """TensorFlow's text (code 457), eagerly and from compiled code; a good index runs."""
    good, bad = np.array([[0, 1], [3, 2]], np.int32), np.array([[0, 1], [4, 0]], np.int32)
    f = tf.function(lambda i: tf.gather_nd(TRANS, i), input_signature=[_spec(good)])
    fn, params = jta.import_function(f, good)
    checked = jta.checked(jax.jit(fn))
    for ids in (good, bad):
        want = outcome(f, ids)
        assert want[0] == ("ok" if ids is good else "error"), want
        assert_same_outcome(outcome(fn, params, ids), want)
        assert_same_outcome(outcome(checked, params, ids), want)


# -- XlaDynamicSlice, XlaDynamicUpdateSlice ------------------------------------------------------------------
CACHE = np.arange(30, dtype=np.float32).reshape(2, 5, 3)
STARTS = [[0, 2, 0], [1, 4, 1], [0, -3, 0], [1, 9, 7], [-2, 0, 5]]  # (in place, and clamped so the slice fits)


@pytest.mark.parametrize("starts", STARTS)
def test_xla_dynamic_update_slice_is_xlas(starts: list[int]) -> None:
    """The update written at the clamped start, of a start known while tracing and of one only known at
    run time (under ``jit``)."""
    update, at = np.full((2, 2, 2), -1.5, np.float32), np.array(starts, np.int32)
    _check(lambda c, u, s: xla.dynamic_update_slice(c, u, s), CACHE, update, at, rtol=0, atol=0, wrt=())
    _check(lambda c, u: xla.dynamic_update_slice(c, u, tf.constant(starts)), CACHE, update, rtol=0, atol=0, wrt=())


@pytest.mark.parametrize("starts", STARTS)
def test_xla_dynamic_slice_is_xlas(starts: list[int]) -> None:
    at = np.array(starts, np.int32)
    _check(lambda c, s: xla.dynamic_slice(c, s, [1, 3, 2]), CACHE, at, rtol=0, atol=0, wrt=())
    _check(lambda c: xla.dynamic_slice(c, tf.constant(starts, tf.int64), [2, 1, 3]), CACHE, rtol=0, atol=0, wrt=())


def test_a_key_value_cache_filled_in_a_loop() -> None:
    """Hugging Face's pattern: each step writes its key at position ``t`` of the cache, a loop variable."""
    keys = np.cos(np.arange(12, dtype=np.float32)).reshape(2, 2, 3)

    def fill(cache: Any, k: Any) -> Any:
        for t in tf.range(2):
            cache = xla.dynamic_update_slice(cache, k[:, t][:, None], tf.stack([0, t + 1, 0]))
        return xla.dynamic_slice(cache, [0, 1, 0], [2, 3, 3])

    _check(fill, CACHE, keys, rtol=0, atol=0, wrt=())


@pytest.mark.parametrize("op", ["XlaDynamicUpdateSlice", "XlaDynamicSlice"])
def test_xla_dynamic_slices_have_no_gradient(op: str) -> None:
    """TensorFlow registers none: the tape raises ``LookupError`` and so does ``jax.grad``, with its text."""
    update, at = np.ones((2, 2, 3), np.float32), np.array([0, 1, 0], np.int32)
    if op == "XlaDynamicSlice":
        def build(c: Any) -> Any:
            return xla.dynamic_slice(c, at, [2, 2, 3])
    else:
        def build(c: Any) -> Any:
            return xla.dynamic_update_slice(c, update, at)
    c = tf.constant(CACHE)
    with tf.GradientTape() as tape:
        tape.watch(c)
        value = tf.reduce_sum(build(c))
    with pytest.raises(LookupError) as want:
        tape.gradient(value, c)
    fn, params = jta.import_function(tf.function(build), CACHE)
    with pytest.raises(LookupError) as got:
        jax.grad(lambda c: jnp.sum(fn(params, c)))(CACHE)
    assert str(got.value) == str(want.value) == f"gradient registry has no entry for: {op}"


@pytest.mark.parametrize("name, build", [
    ("index length", lambda c: xla.dynamic_update_slice(c, tf.ones((2, 2, 3)), [0, 1])),
    ("update rank", lambda c: xla.dynamic_update_slice(c, tf.ones((2, 2)), [0, 1, 0])),
    ("update size", lambda c: xla.dynamic_update_slice(c, tf.ones((2, 6, 3)), [0, 0, 0])),
    ("slice sizes", lambda c: xla.dynamic_slice(c, [0, 0], [1, 2, 2])),
    ("slice size", lambda c: xla.dynamic_slice(c, [0, 0, 0], [1, 6, 1])),
    ("negative size", lambda c: xla.dynamic_slice(c, [0, 0, 0], [1, -1, 1])),
])
def test_xla_dynamic_slices_of_bad_shapes_are_tensorflows_errors(name: str, build: Any) -> None:
    """Shapes that do not fit: TensorFlow's class and text (its kernel's, or the core of its MLIR
    legalization's report) when the import traces the op."""
    f = tf.function(build, input_signature=[_spec(CACHE)])
    with pytest.raises(tf.errors.InvalidArgumentError) as want:
        f(CACHE)
    with pytest.raises(jta.errors.InvalidArgumentError) as got:
        fn, params = jta.import_function(f, CACHE)
        fn(params, CACHE)
    assert str(got.value).split("): ", 1)[1] in str(want.value), (str(got.value), str(want.value))


# -- RaggedRange -----------------------------------------------------------------------------------------------
RANGES = {
    "integer rows": (np.int32([0, 5, 2, 4]), np.int32([3, 1, 9, 4]), np.int32([1, -1, 3, 2])),
    "broadcast": (np.int64([1, 2, 0]), np.int64(7), np.int64(2)),
    "float drift": (np.float32(0.1), np.float32([3.0, 1.0, -1.0]), np.float32([0.1, 0.3, -0.7])),
    "one row": (np.float64(-1.5), np.float64(2.0), np.float64(0.25)),
}


@pytest.mark.parametrize("name", list(RANGES))
def test_ragged_range_is_tensorflows(name: str) -> None:
    """Splits and values bit for bit (a float row adds ``delta`` in order, as the kernel does), of known
    inputs eagerly and under ``jit``, and of traced ones under ``jta.checked`` (the values' length learned);
    no gradient reaches its float inputs."""
    args = RANGES[name]

    def build(s: Any, lim: Any, d: Any) -> Any:
        out = tf.raw_ops.RaggedRange(starts=s, limits=lim, deltas=d, Tsplits=tf.int32)
        return out.rt_nested_splits, out.rt_dense_values

    f = tf.function(build, input_signature=[_spec(a) for a in args])
    # (JAX without x64 narrows 64-bit values: TensorFlow's, narrowed, are the reference)
    want = [np.asarray(w).astype(jax.dtypes.canonicalize_dtype(w.dtype.as_numpy_dtype)) for w in f(*args)]
    fn, params = jta.import_function(f, *args)
    _close(fn(params, *args), want, 0, 0, "eager")
    _close(jta.checked(jax.jit(fn))(params, *args), want, 0, 0, "checked")
    const_fn, const_params = jta.import_function(tf.function(lambda: build(*(tf.constant(a) for a in args))))
    _close(jax.jit(const_fn)(const_params), want, 0, 0, "jit of constants")
    if args[0].dtype != np.float32:
        return
    watched = [tf.constant(a) for a in args]
    with tf.GradientTape() as tape:
        tape.watch(watched)
        value = tf.reduce_sum(build(*watched)[1])
    assert tape.gradient(value, watched) == [None, None, None]
    grads = jax.grad(lambda *xs: jnp.sum(fn(params, *xs)[1]), argnums=(0, 1, 2))(*args)
    assert all(not np.any(g) for g in grads)


def test_ragged_range_under_a_bare_jit_names_jta_checked() -> None:
    args = RANGES["integer rows"]
    f = tf.function(lambda s, lim, d: tf.ragged.range(s, lim, d).flat_values, input_signature=[_spec(a) for a in args])
    fn, params = jta.import_function(f, *args)
    with pytest.raises(jta.errors.UnimplementedError, match="jta.checked"):
        jax.jit(fn)(params, *args)


def test_ragged_range_of_a_zero_delta_is_tensorflows_error() -> None:
    """Eagerly, and from compiled code under ``jta.checked``. (A matrix of deltas fails TensorFlow's shape
    inference, before there is a graph to import.)"""
    starts, limits, deltas = np.int32([0, 1, 2]), np.int32([3, 4, 5]), np.int32([1, 0, 2])
    f = tf.function(lambda s, lim, d: tf.raw_ops.RaggedRange(starts=s, limits=lim, deltas=d).rt_dense_values,
                    input_signature=[_spec(starts), _spec(limits), _spec(deltas)])
    want = outcome(f, starts, limits, deltas)
    assert want[0] == "error", want
    fn, params = jta.import_function(f, starts, limits, np.int32([1, 1, 1]))
    assert_same_outcome(outcome(fn, params, starts, limits, deltas), want)
    assert_same_outcome(outcome(jta.checked(jax.jit(fn)), params, starts, limits, deltas), want)


def _bidirectional_gru() -> tuple[Any, Any]:
    import tf_keras as tfk

    tf.keras.utils.set_random_seed(3)
    layer = tfk.layers.Bidirectional(tfk.layers.GRU(3, return_sequences=True))

    def build(values: Any, lengths: Any) -> Any:
        return layer(tf.RaggedTensor.from_row_lengths(values, lengths)).to_tensor(shape=[3, 4, 6])

    return layer, build


@pytest.mark.parametrize("traced", [False, pytest.param(True, marks=pytest.mark.long_only)])
def test_bidirectional_gru_of_a_ragged_tensor_built_inside(traced: bool) -> None:
    """The red team's program: the backward layer's outputs reversed back per ragged row (``RaggedRange``),
    eagerly, and under ``--long`` (8 s: two compilations, the values' length learned) under ``jta.checked``,
    where ``jax.grad`` in the weights is the tape's. (The raw op's tests above run ``jta.checked`` by default.)"""
    values = np.cos(np.arange(27, dtype=np.float32)).reshape(9, 3)
    lengths = np.int64([4, 2, 3])
    layer, build = _bidirectional_gru()
    f = tf.function(build, input_signature=[_spec(values), _spec(lengths)])
    want = f(values, lengths)
    assert "RaggedRange" in op_types(f)
    fn, params = jta.import_function(f, values, lengths)
    _close(fn(params, values, lengths), want, 1e-6, 1e-6, "eager")
    if not traced:
        return
    _close(jta.checked(jax.jit(fn))(params, values, lengths), want, 1e-6, 1e-6, "checked")
    weights = np.cos(np.arange(want.shape.num_elements(), dtype=np.float32)).reshape(want.shape)
    with tf.GradientTape() as tape:
        value = tf.reduce_sum(weights * build(tf.constant(values), tf.constant(lengths)))
    tape_grads = tape.gradient(value, layer.trainable_variables)
    got = jta.checked(jax.jit(jax.grad(lambda p: jnp.sum(weights * fn(p, values, lengths)))))(params)
    by_name = {v.name: g for v, g in zip(layer.trainable_variables, tape_grads, strict=True)}
    assert len(got) == len(by_name)
    for name, g in got.items():
        match = [k for k in by_name if name.endswith(k.split(":")[0]) or k.split(":")[0].endswith(name)]
        assert len(match) == 1, (name, sorted(by_name))
        np.testing.assert_allclose(g, tf.convert_to_tensor(by_name[match[0]]).numpy(), rtol=1e-5, atol=1e-6,
                                   err_msg=name)


@pytest.mark.long_only  # (18 s: the gradient graph of two GRU loops, learned sizes)
def test_bidirectional_gru_of_a_ragged_tensor_train_step() -> None:
    """The tape inside the ``tf.function``: TensorFlow's gradient graph of the ragged reversal imported."""
    values = np.cos(np.arange(27, dtype=np.float32)).reshape(9, 3)
    lengths = np.int64([4, 2, 3])
    layer, build = _bidirectional_gru()
    build(values, lengths)  # (the layer's weights)
    weights = np.cos(np.arange(72, dtype=np.float32)).reshape(3, 4, 6)
    step = tape_step(lambda v, n: tf.reduce_sum(weights * build(v, n)), [values, lengths], (),
                     layer.trainable_variables)
    want = step(values, lengths)
    fn, params = jta.import_function(step, values, lengths)
    _close(jta.checked(jax.jit(fn))(params, values, lengths), want, 1e-6, 1e-6, "train step")
