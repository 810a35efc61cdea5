"""Values TensorFlow's kernels check fail as in TensorFlow: indices out of range (gathers, scatters,
slices, ``ReverseSequence``, labels), integer division by zero and negative integer powers, NaN and
infinities (``CheckNumerics``), false assertions, shapes ``EnsureShape`` rejects, a scan's axis.

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
from tests.helpers.compare import assert_same_outcome, outcome  # noqa: E402

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
    "slice_size": (lambda x, i: tf.slice(x, [i[0], 0], [2, 3]), [3, 0], [2, 0]),
    "slice_begin": (lambda x, i: tf.slice(x, [i[0], i[1]], [1, 1]), [1, 4], [1, 2]),
    "index_of_one_element": (lambda x, i: x[i[0]], [4, 0], [3, 0]),
    "negative_index_of_one_element": (lambda x, i: x[i[0], ..., i[1]], [-1, -4], [-4, -3]),
    "floordiv_by_zero": (lambda x, i: tf.cast(tf.math.floordiv(tf.constant([7, -7]), i), tf.float32), [2, 0], [2, 3]),
    "floormod_by_zero": (lambda x, i: tf.cast(tf.math.floormod(tf.constant([7, -7]), i), tf.float32), [0, 1], [5, 1]),
    "integer_power": (lambda x, i: tf.cast(tf.pow(tf.constant([2, 3]), i), tf.float32), [-1, 2], [1, 2]),
    "labels": (lambda x, i: tf.nn.sparse_softmax_cross_entropy_with_logits(labels=i, logits=x[:2]), [1, 3], [1, 2]),
    "negative_labels": (lambda x, i: tf.nn.sparse_softmax_cross_entropy_with_logits(labels=i, logits=x[:2]), [-1, 0],
                        [0, 0]),
}


def _good_then_bad(build: Any, bad: list[Any], good: list[Any]) -> None:
    """``build`` of ``(X, indices)`` with the ``good`` indices gives TensorFlow's value and with the ``bad``
    ones its error (class and text), eagerly and under ``jta.checked``."""
    bad_, good_ = np.array(bad, np.int32), np.array(good, np.int32)
    f = tf.function(build, input_signature=[tf.TensorSpec(X.shape, tf.float32), tf.TensorSpec(bad_.shape, tf.int32)])
    jax_fn, params = jta.import_function(f, X, good_)
    checked = jta.checked(jax.jit(jax_fn))
    for indices in (good_, bad_):
        want = outcome(f, X, indices)
        assert want[0] == ("ok" if indices is good_ else "error"), want
        assert_same_outcome(outcome(jax_fn, params, X, indices), want)
        assert_same_outcome(outcome(checked, params, X, indices), want)


@pytest.mark.parametrize("name", [n if k % 2 == 0 else pytest.param(n, marks=pytest.mark.long_only)
                                  for k, n in enumerate(CASES)])  # (half by default, all under --long)
def test_indices_out_of_range_fail_as_in_tensorflow(name: str) -> None:
    _good_then_bad(*CASES[name])


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


def test_more_labels_than_a_record_holds() -> None:
    """Eagerly every label value is written, as TensorFlow does; from compiled code the first two and
    ``...`` (an error record holds three integers)."""
    f = tf.function(lambda x, i: tf.nn.sparse_softmax_cross_entropy_with_logits(labels=i, logits=x),
                    input_signature=[tf.TensorSpec([4, 3], tf.float32), tf.TensorSpec([4], tf.int32)])
    bad = np.array([0, 2, 5, 1], np.int32)
    want = outcome(f, X, bad)
    jax_fn, params = jta.import_function(f, X, bad % 3)
    assert_same_outcome(outcome(jax_fn, params, X, bad), want)
    got = outcome(jta.checked(jax.jit(jax_fn)), params, X, bad)
    assert got[2].endswith("Received a label value of 5 which is outside the valid range of [0, 3).  Label values: "
                           "0 2 ..."), got


def test_run_time_bounds_run_eagerly() -> None:
    """A slice ``x[i:i + 2]`` of an argument ``i``, ``tf.slice`` to the end (size -1) of a run-time begin
    and ``band_part`` of run-time counts run in an eager call (their results' shapes are known there) and
    are refused under jit; a count TensorFlow rejects fails with its text."""
    f = tf.function(lambda x, i: (x[i[0]:i[0] + 2] + tf.linalg.band_part(x, i[1], -1)[:2], tf.slice(x, [i[0], 0], [-1, 1])),
                    input_signature=[tf.TensorSpec([4, 3], tf.float32), tf.TensorSpec([2], tf.int32)])
    jax_fn, params = jta.import_function(f, X, np.array([1, 0], np.int32))
    for i in ([1, 0], [2, 2], [0, 5]):
        for k in range(2):
            assert_same_outcome(outcome(lambda *a, k=k: jax_fn(*a)[k], params, X, np.array(i, np.int32)),
                   outcome(lambda *a, k=k: f(*a)[k], X, np.array(i, np.int32)))
    with pytest.raises(jta.errors.UnimplementedError, match="must be static"):
        jax.jit(jax_fn)(params, X, np.array([1, 0], np.int32))


@pytest.mark.parametrize("values", [[1.0, np.nan, 2.0], [np.inf, 0.0, -np.inf], [-np.inf, np.nan, 1.0]],
                         ids=["nan", "inf", "both"])
def test_check_numerics_fails_as_in_tensorflow(values: list[float]) -> None:
    """``tf.debugging.check_numerics`` was imported as an identity: NaN and infinities now fail with
    TensorFlow's text, eagerly and from compiled code; finite values pass through."""
    f = tf.function(lambda x: tf.debugging.check_numerics(x * 2.0, "doubled"),
                    input_signature=[tf.TensorSpec([3], tf.float32)])
    bad, good = np.array(values, np.float32), np.array([1.0, 2.0, 3.0], np.float32)
    jax_fn, params = jta.import_function(f, good)
    for run in (jax_fn, jta.checked(jax.jit(jax_fn))):
        assert_same_outcome(outcome(run, params, good), outcome(f, good))
        assert_same_outcome(outcome(run, params, bad), outcome(f, bad))


def test_assertions_fail_as_in_tensorflow() -> None:
    """``tf.debugging.assert_*`` and ``tf.Assert`` (an ``Assert`` in the false branch of an ``If``) were
    imported as no-ops: a false condition now fails with TensorFlow's text, eagerly; from compiled code
    a traced tensor of the data is written ``[...]``."""
    def body(x: Any) -> Any:
        tf.debugging.assert_positive(x, message="x must be positive")
        tf.Assert(tf.reduce_all(x < 10.0), ["too large", x, tf.shape(x)], summarize=2)
        return x * 2.0

    f = tf.function(body, input_signature=[tf.TensorSpec([3], tf.float32)])
    jax_fn, params = jta.import_function(f, np.ones(3, np.float32))
    checked = jta.checked(jax.jit(jax_fn))
    for x in ([1.0, 2.0, 3.0], [1.0, -2.0, 3.0], [1.0, 20.0, 3.0]):
        x_ = np.array(x, np.float32)
        want = outcome(f, x_)
        assert_same_outcome(outcome(jax_fn, params, x_), want)
        got = outcome(checked, params, x_)
        if want[0] == "ok":
            assert_same_outcome(got, want)
        else:
            assert got[:2] == want[:2], (got, want)
            assert got[2].endswith(("[x (x:0) = ] [...]", "[too large] [...] [3]")), got


@pytest.mark.parametrize("shape", [(2, 3), (2, 4), (3,)], ids=["compatible", "a dimension", "the rank"])
def test_ensure_shape_fails_as_in_tensorflow(shape: tuple[int, ...]) -> None:
    """``tf.ensure_shape`` was imported as an identity: a shape it rejects now fails with TensorFlow's
    text, decided while tracing (a function is traced per shape), also inside a loop body (where
    TensorFlow names the tensor by its inlined body, ``while/body/_1/while/...``, and jta by the node)."""
    def rows(x: Any) -> Any:
        acc = tf.zeros([3])
        for i in tf.range(tf.shape(x)[0]):
            acc += tf.ensure_shape(x[i], [3])
        return acc

    top = tf.function(lambda x: tf.ensure_shape(x * 2.0, [None, 3]), input_signature=[tf.TensorSpec(None, tf.float32)])
    loop = tf.function(rows, input_signature=[tf.TensorSpec(None, tf.float32)])
    x = np.ones(shape, np.float32)
    for f in (top, loop):
        jax_fn, params = jta.import_function(f, np.ones((2, 3), np.float32))
        want = outcome(f, x)
        assert want[0] == ("ok" if shape == (2, 3) else "error"), want
        for run in (jax_fn, jta.checked(jax.jit(jax_fn))):
            got = outcome(run, params, x)
            if f is top or want[0] == "ok":
                assert_same_outcome(got, want)
            else:
                assert got[:2] == want[:2], (got, want)
                assert got[2].split("Shape of tensor while/")[1] in want[2], (got, want)


def test_a_scan_axis_out_of_range_fails_as_in_tensorflow() -> None:
    """``tf.cumsum`` (``cumprod``, ``cumulative_logsumexp``) wrapped an axis out of range modulo the rank."""
    for axis in (2, -3):
        f = tf.function(lambda x, axis=axis: tf.math.cumsum(x, axis=axis), input_signature=[tf.TensorSpec([4, 3], tf.float32)])
        want = outcome(f, X)
        assert want[0] == "error", want
        got = outcome(lambda x, f=f: jta.import_function(f, X)[0]({}, x), X)
        assert_same_outcome(got, want)


STATIC_ARGUMENTS = {
    "reduction_axes": lambda x: tf.raw_ops.Sum(input=x, axis=tf.constant([0, -2]), keep_dims=False),
    "transpose": lambda x: tf.raw_ops.Transpose(x=x, perm=tf.constant([1, 1])),
    "roll_axis": lambda x: tf.raw_ops.Roll(input=x, shift=tf.constant([1]), axis=tf.constant([2])),
    "tile": lambda x: tf.raw_ops.Tile(input=x, multiples=tf.constant([1, -1])),
    "broadcast_to": lambda x: tf.raw_ops.BroadcastTo(input=x, shape=tf.constant([-1, 4, 3])),
}


@pytest.mark.parametrize("name", [n if n in ("reduction_axes", "tile") else pytest.param(n, marks=pytest.mark.long_only)
                                  for n in STATIC_ARGUMENTS])
def test_static_arguments_are_checked_as_in_tensorflow(name: str) -> None:
    """A constant axis, permutation, multiples or shape that TensorFlow's kernel rejects (its shape
    inference lets them through) raised JAX's ValueError or TypeError, or MLIR's error: now TensorFlow's
    class and text while tracing. (Any other input an op's JAX code rejects is an InvalidArgumentError
    naming the node.)"""
    f = tf.function(STATIC_ARGUMENTS[name], input_signature=[tf.TensorSpec([4, 3], tf.float32)])
    want = outcome(f, X)
    assert want[0] == "error", want
    jax_fn, params = jta.import_function(f, X)
    assert_same_outcome(outcome(jax_fn, params, X), want)
    assert_same_outcome(outcome(jta.checked(jax.jit(jax_fn)), params, X), want)


def _scattered(x: Any, i: Any) -> Any:
    ta = tf.TensorArray(tf.float32, size=4, element_shape=[3])
    return ta.scatter(i, x[:2]).stack()


def _scattered_raw(x: Any, i: Any) -> Any:
    handle = tf.raw_ops.TensorListScatterV2(tensor=x[:2], indices=i, element_shape=tf.constant([3]),
                                            num_elements=tf.constant(3))
    return tf.raw_ops.TensorListStack(input_handle=handle, element_shape=tf.constant([3]), element_dtype=tf.float32)


def _resized(x: Any, i: Any) -> Any:
    handle = tf.raw_ops.TensorListFromTensor(tensor=x, element_shape=tf.constant([3]))
    handle = tf.raw_ops.TensorListResize(input_handle=handle, size=i[0])
    return tf.raw_ops.TensorListStack(input_handle=handle, element_shape=tf.constant([3]), element_dtype=tf.float32)


LISTS = {  # name -> (function of (x, indices), bad indices, good indices)
    "scatter_past_a_tensor_arrays_size": (_scattered, [1, 5], [3, 0]),
    "scatter_past_num_elements": (_scattered_raw, [0, 3], [2, 0]),
    "scatter_at_a_negative_index": (_scattered_raw, [-1, 0], [1, 0]),
    "resize_to_a_negative_size": (_resized, [-1, 0], [2, 0]),
}


@pytest.mark.parametrize("name", LISTS)
def test_list_indices_and_sizes_fail_as_in_tensorflow(name: str) -> None:
    """TensorList scatters and resizes, found by an op-table fuzzer: an index past a scatter's
    ``num_elements`` or below 0, a negative size and a ``TensorArray``'s ``stack()`` of a list a scatter
    grew past its size returned values where TensorFlow raises; a run-time ``num_elements`` was
    ignored under jit. Eagerly and under ``jta.checked``, against TF."""
    _good_then_bad(*LISTS[name])


@pytest.mark.parametrize("op", ["inverse", "solve"])
def test_a_singular_matrix_fails_as_in_tensorflow(op: str) -> None:
    """``tf.linalg.inv``/``solve`` of a singular matrix gave infinities and NaN where TensorFlow's kernel
    finds a zero pivot and raises."""
    build = {"inverse": lambda a: tf.linalg.inv(a), "solve": lambda a: tf.linalg.solve(a, tf.ones([2, 1]))}[op]
    f = tf.function(build, input_signature=[tf.TensorSpec([2, 2], tf.float32)])
    good, singular = np.array([[1, 2], [3, 4]], np.float32), np.array([[1, 2], [2, 4]], np.float32)
    jax_fn, params = jta.import_function(f, good)
    for run in (jax_fn, jta.checked(jax.jit(jax_fn))):
        assert_same_outcome(outcome(run, params, good), outcome(f, good), rtol=1e-5)
        assert_same_outcome(outcome(run, params, singular), outcome(f, singular))


def test_a_run_time_shape_is_checked_as_in_tensorflow() -> None:
    """``tf.reshape(x, s)`` of an argument ``s``: TensorFlow's texts for a shape that does not fit, under
    ``jta.checked`` (which learns ``s``) too, where the shape learned in an earlier call is not this
    call's (it is learned afresh before a failure is reported)."""
    f = tf.function(lambda x, s: tf.reshape(x, s), input_signature=[tf.TensorSpec([4, 3], tf.float32),
                                                                      tf.TensorSpec([2], tf.int32)])
    jax_fn, params = jta.import_function(f, X, np.array([2, 6], np.int32))
    checked = jta.checked(jax.jit(jax_fn))
    for shape in ([2, 6], [5, -1], [6, 2], [3, 5], [-1, -1], [2, -6], [0, -1]):
        s = np.array(shape, np.int32)
        want = outcome(f, X, s)
        assert_same_outcome(outcome(jax_fn, params, X, s), want)
        assert_same_outcome(outcome(checked, params, X, s), want)


SHAPE_ARGUMENTS = {  # name -> (function of (x, i), a value of i TensorFlow's kernel rejects)
    "batch_to_space_crops": (lambda x, i: tf.raw_ops.BatchToSpaceND(
        input=tf.reshape(x, [4, 1, 3, 1]), block_shape=tf.constant([2, 1]), crops=i), [[0, 3], [0, 0]]),
    "split_sizes": (lambda x, i: tf.raw_ops.SplitV(value=x, size_splits=i, axis=1, num_split=2)[0], [1, 1]),
    "matrix_diagonal": (lambda x, i: tf.raw_ops.MatrixDiagPartV3(input=x, k=i, padding_value=0.), [5]),
    "slice_size": (lambda x, i: tf.raw_ops.Slice(input=x, begin=tf.constant([1, 1]), size=i), [-2, 1]),
    "scatter_shape": (lambda x, i: tf.raw_ops.ScatterNd(indices=tf.constant([[0, 1]]), updates=tf.constant([1.]),
                                                        shape=i), [0, 4]),
    "list_element_shape": (lambda x, i: tf.raw_ops.TensorListStack(
        input_handle=tf.raw_ops.TensorListFromTensor(tensor=x, element_shape=tf.constant([3])),
        element_shape=i, element_dtype=tf.float32), [5]),
}


@pytest.mark.parametrize("name", [n if n == "batch_to_space_crops" else pytest.param(n, marks=pytest.mark.long_only)
                                  for n in SHAPE_ARGUMENTS])
def test_shape_arguments_are_checked_as_in_tensorflow(name: str) -> None:
    """Crops, split sizes, diagonals, a slice's size, a scatter's shape and a list's element shape that
    TensorFlow's kernel rejects gave values (the op's JAX code cropped, padded or dropped to fit), found by
    the op-table fuzzer: now TensorFlow's class and text. (They are arguments of an eager call here: under
    ``jit`` they must be static, and TensorFlow rejects a constant while tracing.)"""
    build, bad = SHAPE_ARGUMENTS[name]
    bad = np.array(bad, np.int32)
    f = tf.function(build, input_signature=[tf.TensorSpec([4, 3], tf.float32), tf.TensorSpec(bad.shape, tf.int32)])
    want = outcome(f, X, bad)
    assert want[0] == "error", want
    jax_fn, params = jta.import_function(f, X, bad)
    assert_same_outcome(outcome(jax_fn, params, X, bad), want)


def test_a_uniform_integer_range_is_checked_as_in_tensorflow() -> None:
    """``tf.random.stateless_uniform`` of integers with a run-time ``minval >= maxval`` drew from an empty
    range (code 490), eagerly and from compiled code."""
    _good_then_bad(lambda x, i: tf.cast(tf.random.stateless_uniform([3], [1, 2], minval=i[0], maxval=i[1],
                                                                    dtype=tf.int32), tf.float32), [5, 5], [0, 5])


def test_a_stack_past_its_max_size_fails() -> None:
    """A TF1 stack pushed past a run-time ``max_size`` kept the value (code 491; TensorFlow's text adds a
    count of the process's stacks to the stack's name)."""
    g = tf.Graph()
    with g.as_default():
        size = tf.compat.v1.placeholder(tf.int32, [], name="size")
        h = tf.raw_ops.StackV2(max_size=size, elem_type=tf.float32)
        pushed = tf.raw_ops.StackPushV2(handle=h, elem=tf.constant([1.0]))
        with tf.control_dependencies([pushed]):
            out = tf.raw_ops.StackPopV2(handle=h, elem_type=tf.float32)
    f = jta.import_graph_def(g.as_graph_def(), ["size:0"], [out.name])
    for run in (f, jta.checked(jax.jit(f))):
        np.testing.assert_array_equal(run(np.int32(1))[0], [1.0])
        with pytest.raises(jta.errors.InvalidArgumentError, match=r"Stack\[StackV2\] overflowed its max_size \(0\)"):
            run(np.int32(0))


def test_shifts_and_inplace_rows_give_tensorflows_values() -> None:
    """A shift by a negative amount or past the width (TensorFlow clamps it) and an ``InplaceAdd`` row past
    the end (TensorFlow takes it modulo the rows) gave other values."""
    def build(x: Any, i: Any) -> Any:
        shifted = [tf.bitwise.left_shift(tf.constant([5, -5, 1]), i[:3]),
                   tf.bitwise.right_shift(tf.constant([5, -5, 1]), i[:3])]
        return tf.concat([tf.cast(tf.concat(shifted, 0), tf.float32),
                          tf.reshape(tf.raw_ops.InplaceAdd(x=x, i=i[3:], v=x[:2]), [-1])], 0)

    f = tf.function(build, input_signature=[tf.TensorSpec([4, 3], tf.float32), tf.TensorSpec([5], tf.int32)])
    i = np.array([-1, 32, 40, 0, 9], np.int32)
    jax_fn, params = jta.import_function(f, X, i)
    want = outcome(f, X, i)
    assert_same_outcome(outcome(jax_fn, params, X, i), want)
    assert_same_outcome(outcome(jta.checked(jax.jit(jax_fn)), params, X, i), want)
