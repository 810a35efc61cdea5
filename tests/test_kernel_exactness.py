"""Compiled code raises what eager code raises, and returns what it returns.

Each case runs three ways: eagerly (concrete arguments), under a bare ``jax.jit`` (then
``jta.throw`` of what it returns; a value op's check raises ``JaxRuntimeError`` at run time, and
``jta.throw()`` gives jta's exception back) and as ``jta.checked(f)``; all three must agree on
the first error's class and text, or on every value. The cases are the defects an adversarial
user measured:

1. a split at traced lengths into an array without an element shape (ragged or bad lengths);
2. a traced int64 index (or length) into an array made before x64 was enabled (its error
   record is 32-bit);
3. a split at traced lengths whose pieces do not fit the element shape;
4. a gradient array grown by a traced gather, which fails later in the same gather;
5. raw-op value ops (and the value-returning gradient rules) under a bare ``jit`` whose state
   is dropped.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Optional

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jta
from jta import gradients
from jta import raw_ops as ops
from tests.helpers import budget

f32 = jnp.float32
ERRORS = (jta.errors.TensorArrayError, ValueError)
Outcome = tuple[Optional[tuple[str, str]], Any]


def _values(out: Any) -> list:
    """Every leaf as NumPy, but the arrays' flows (each new array's is distinct)."""
    return [np.asarray(x) for path, x in jax.tree_util.tree_leaves_with_path(out)
            if "flow" not in jax.tree_util.keystr(path)]


def _outcome(fn: Callable[..., Any], *args: Any) -> Outcome:
    """``(class name, text)`` of the first error ``fn(*args)`` reports (the arrays and states it
    returns included), or ``None`` and its values."""
    _forget_raised()
    try:
        return None, _values(jta.throw(fn(*args)))
    except jax.errors.JaxRuntimeError:
        try:
            jta.throw()  # a value op's check raised in compiled code: jta's exception
        except ERRORS as e:
            return (type(e).__name__, str(e)), None
        raise
    except ERRORS as e:
        return (type(e).__name__, str(e)), None


def _forget_raised() -> None:
    """``jta.throw()`` raises (and forgets) what a check in compiled code raised before."""
    try:
        jta.throw()
    except ERRORS:
        pass


def _runs(fn: Callable[..., Any], *args: Any) -> dict[str, Outcome]:
    """``fn(*args)`` eagerly (NumPy arguments), under ``jax.jit`` and as ``jta.checked(fn)``."""
    concrete = [np.asarray(a) if isinstance(a, (list, int)) else a for a in args]
    traced = [jnp.asarray(a) if isinstance(a, (list, int, np.ndarray, np.generic)) else a for a in args]
    return {"eager": _outcome(fn, *concrete), "jit": _outcome(jax.jit(fn), *traced),
            "checked": _outcome(jta.checked(fn), *traced)}


def _same(a: Outcome, b: Outcome) -> bool:
    if a[0] != b[0] or (a[1] is None) != (b[1] is None):
        return False
    return a[1] is None or (len(a[1]) == len(b[1]) and all(
        x.shape == y.shape and x.dtype == y.dtype and np.array_equal(x, y) for x, y in zip(a[1], b[1], strict=True)))


def assert_agree(fn: Callable[..., Any], *args: Any) -> Outcome:
    """Eager, jit and checked runs of ``fn(*args)`` agree; returns the eager outcome."""
    runs = _runs(fn, *args)
    for mode in ("jit", "checked"):
        assert _same(runs["eager"], runs[mode]), f"{mode}: {runs[mode]} != eager: {runs['eager']}"
    return runs["eager"]


def _error(outcome: Outcome) -> tuple[str, str]:
    assert outcome[0] is not None, f"no error: {outcome[1]}"
    return outcome[0]


# -- 1. a split at traced lengths into an array of unknown element shape ------------------------

def _split_read(lengths, **kw):
    ta = jta.TensorArray(jnp.int32, size=2, tensor_array_name="foo", **kw)
    ta = ta.split(jnp.arange(4, dtype=jnp.int32), lengths)
    return ta.read(0), ta.read(1)


@pytest.mark.parametrize("lengths", [[2, 2], [1, 1], [2, 3], [0, 5], [-1, 5], [5, -1], [-2, -3]])
@pytest.mark.parametrize("infer_shape", [True, False])
def test_split_at_traced_lengths_without_element_shape(infer_shape, lengths):
    """Equal pieces read back as eagerly; bad lengths fail with eager code's error (the sum of
    lengths, a negative length: the first one, with its own value)."""
    assert_agree(lambda ls: _split_read(ls, infer_shape=infer_shape), lengths)


def test_split_at_traced_lengths_sum_error_names_the_value_shape():
    eager = assert_agree(lambda ls: _split_read(ls, infer_shape=False), [2, 3])
    assert _error(eager) == ("InvalidArgumentError", "Expected sum of lengths to be equal to values.shape[0], "
                             "but sum of lengths is 5 and value's shape is: [4]")


@pytest.mark.parametrize("lengths", [[3, 1], [1, 3], [4, 0]])
def test_ragged_split_at_traced_lengths_raises_rather_than_cutting_equal_pieces(lengths):
    """Eager code writes ragged pieces into an ``infer_shape=False`` array; compiled code cannot
    (the pieces' shapes would depend on traced values), so it raises jta's error instead of
    returning equal pieces."""
    runs = _runs(lambda ls: _split_read(ls, infer_shape=False), lengths)
    assert runs["eager"][0] is None
    assert [v.tolist() for v in runs["eager"][1]] == [list(range(lengths[0])), list(range(lengths[0], 4))]
    expected = ("InvalidArgumentError", f"TensorArray foo: split lengths must all equal 2 when they are traced (the "
                f"elements must share one shape), but lengths[0] is {lengths[0]}. Pass concrete lengths for "
                "ragged splits.")
    assert runs["jit"] == (expected, None)
    assert runs["checked"] == (expected, None)


@pytest.mark.parametrize("lengths", [[3, 1], [1, 3], [2, 2], [1, 1]])
def test_split_at_traced_lengths_pins_the_first_piece_shape(lengths):
    """With ``infer_shape`` the first piece fixes the element shape; a later piece of another
    length fails there, as eagerly."""
    assert_agree(lambda ls: _split_read(ls), lengths)


def test_split_at_traced_lengths_after_a_write_reports_the_first_failing_piece():
    """Split's writes fail in order: a slot written before fails as the piece reaches it,
    unless an earlier piece's shape failed first."""
    def f(lengths):
        ta = jta.TensorArray(f32, size=3, element_shape=(2,), tensor_array_name="foo").write(1, jnp.ones(2))
        return ta.split(jnp.arange(6.0), lengths)

    assert "already been written to" in _error(assert_agree(f, [2, 2, 2]))[1]
    assert "value shape is [1]" in _error(assert_agree(f, [2, 1, 3]))[1]
    assert "index 0 because the value shape is [3]" in _error(assert_agree(f, [3, 1, 2]))[1]


def test_split_at_traced_lengths_into_a_gradient_array():
    """``jta.gradients.concat_grad`` at traced lengths aggregates the pieces as eagerly."""
    def f(lengths):
        ta = jta.TensorArray(f32, size=2, element_shape=(2,), tensor_array_name="foo").split(jnp.ones(4), [2, 2])
        grads = gradients.concat_grad({}, ta, lengths, jnp.arange(4.0), "gradients")
        return gradients.split_grad(grads, ta, "gradients")[1]

    assert assert_agree(f, [2, 2])[1][0].tolist() == [0.0, 1.0, 2.0, 3.0]
    assert "value shape is [1]" in _error(assert_agree(f, [1, 3]))[1]


# -- 2. a traced int64 index into an array made before x64 was enabled ---------------------------

WIDE = [2**32, -(2**32), 2**32 + 1, 2**33 - 1]


def _before_x64(size=3, **kw):
    """A size-``size`` array of ``0, 1, 2, ...`` made while x64 is off: its error record is int32."""
    assert not jax.config.jax_enable_x64
    ta = jta.TensorArray(f32, size=size, element_shape=(), tensor_array_name="foo", **kw)
    return ta.unstack(jnp.arange(float(size))) if size else ta


@pytest.mark.parametrize("index", WIDE)
@pytest.mark.parametrize("op", ["read", "gather", "write", "scatter"])
def test_traced_int64_index_into_an_array_made_before_x64(op, index):
    ta = jta.TensorArray(f32, size=3, element_shape=(), tensor_array_name="foo") if op in ("write", "scatter") \
        else _before_x64()
    run = {"read": lambda ta, i: ta.read(i),
           "gather": lambda ta, i: ta.gather(jnp.stack([i * 0, i])),
           "write": lambda ta, i: ta.write(i, 1.0),
           "scatter": lambda ta, i: ta.scatter(jnp.stack([i]), jnp.ones(1, f32))}[op]
    with jax.enable_x64(True):
        eager = assert_agree(run, ta, np.int64(index))
    assert str(index) in _error(eager)[1]


@pytest.mark.parametrize("index", WIDE)
def test_traced_int64_index_into_a_dynamic_array_made_before_x64(index):
    ta = _before_x64(size=1, dynamic_size=True, capacity=4)
    with jax.enable_x64(True):
        eager = assert_agree(lambda ta, i: ta.write(i, 1.0), ta, np.int64(index))
    assert str(index) in _error(eager)[1]


@pytest.mark.parametrize("index", WIDE)
def test_traced_int64_index_into_raw_ops_made_before_x64(index):
    state = ops.new_state()
    state, h, flow = ops.TensorArrayV3(state, 3, f32, element_shape=(), tensor_array_name="foo")

    def read(state, i):
        return ops.TensorArrayReadV3(state, h, i, flow, f32)

    def write(state, i):
        return ops.TensorArrayWriteV3(state, h, i, 1.0, flow)[0]

    with jax.enable_x64(True):
        for fn in (read, write):
            assert str(index) in _error(assert_agree(fn, state, np.int64(index)))[1]


@pytest.mark.parametrize("lengths, text", [
    ([2**32 + 2, 2], "sum of lengths is 4294967300 and"),
    ([2, -(2**32)], "lengths[1] is -4294967296."),
    ([2**32 + 2, 2**32 + 2], "saw (4294967298,) but expected (2,) "),
    ([2, 2], None),
])
def test_traced_int64_lengths_into_an_array_made_before_x64(lengths, text):
    """Split's lengths are checked in their own width: ``2**32 + 2`` does not wrap to ``2``."""
    ta = jta.TensorArray(f32, size=2, element_shape=(2,), tensor_array_name="foo")
    with jax.enable_x64(True):
        eager = assert_agree(lambda ta, ls: ta.split(jnp.arange(4.0, dtype=f32), ls), ta, np.int64(lengths))
    assert eager[0] is None if text is None else text in _error(eager)[1]


# -- 3. a split at traced lengths whose pieces do not fit the element shape ----------------------

def _split_into(element_shape, value_shape, size=2, api="ta", infer_shape=True):
    value = jnp.arange(float(np.prod(value_shape)), dtype=f32).reshape(value_shape)

    def f(lengths):
        if api == "ta":
            ta = jta.TensorArray(f32, size=size, element_shape=element_shape, infer_shape=infer_shape,
                                 tensor_array_name="foo")
            return ta.split(value, lengths)
        state = ops.new_state()
        state, h, flow = ops.TensorArrayV3(state, size, f32, element_shape=element_shape,
                                           identical_element_shapes=infer_shape, tensor_array_name="foo")
        return ops.TensorArraySplitV3(state, h, value, lengths, flow)[0]

    return f


SHAPE_CASES = {
    # id: (element_shape, value shape, size)
    "3-into-4-rows": ((3,), (4,), 2),
    "2x2-into-6x2": ((2, 2), (6, 2), 2),
    "1-into-3-rows": ((1,), (3,), 3),
    "2-into-4-rows": ((2,), (4,), 2),  # pieces that fit
}


@pytest.mark.parametrize("lengths", [[2, 2], [-1, 5]] + ([[3, 1], [2, 3], [1, 3], [1, 1], [3, 3]] if budget.LONG else []))
@pytest.mark.parametrize("api", ["ta", "raw"])
@pytest.mark.parametrize("case", list(SHAPE_CASES))
def test_traced_split_whose_pieces_do_not_fit_the_element_shape(case, api, lengths):
    """TensorFlow's Python layer checks equal lengths first (``Inconsistent shapes``, a
    ValueError; the raw op has no Python layer), then the kernel checks the lengths, then each
    piece in order against the element shape: compiled code records each in that order."""
    element_shape, value_shape, size = SHAPE_CASES[case]
    lengths = (lengths + [0])[:size]
    assert_agree(_split_into(element_shape, value_shape, size, api), lengths)


def test_traced_split_texts_are_eager_code_texts():
    f = _split_into((3,), (4,))
    assert _error(assert_agree(f, [2, 2])) == ("ValueError", "Inconsistent shapes: saw (2,) but expected (3,) ")
    assert _error(assert_agree(f, [3, 1])) == (
        "InvalidArgumentError", "TensorArray foo: Could not write to TensorArray index 1 because the value shape is "
        "[1] which is incompatible with the TensorArray's inferred element shape: [3] (consider setting "
        "infer_shape=False).")
    g = _split_into((2, 2), (6, 2))
    assert _error(assert_agree(g, [3, 3])) == ("ValueError", "Inconsistent shapes: saw (3, 2) but expected (2, 2) ")
    h = _split_into(None, (4,))  # infer_shape: the first piece fixes the element shape
    assert _error(assert_agree(h, [1, 3]))[1].endswith(
        "index 1 because the value shape is [3] which is incompatible with the TensorArray's inferred element "
        "shape: [1] (consider setting infer_shape=False).")


def test_traced_split_whose_trailing_dims_never_fit_raises_while_tracing():
    """No lengths make ``[?, 2]`` pieces fit ``[2, 3]``: a static problem, raised while tracing
    with the piece's first dim ``<traced>`` (as a static error at a traced index is)."""
    f = _split_into((2, 3), (4, 2), api="raw")
    text = ("TensorArray foo_0: Could not write to TensorArray index 0 because the value shape is [<traced>,2] "
            "which is incompatible with the TensorArray's inferred element shape: [2,3] (consider setting "
            "infer_shape=False).")
    for run in (jax.jit(f), jta.checked(f)):
        with pytest.raises(jta.errors.InvalidArgumentError) as info:
            run(jnp.asarray([2, 2]))
        assert str(info.value) == text
    assert "value shape is [2,2]" in _error(_outcome(f, np.asarray([2, 2])))[1]


# -- 4. a gradient array grown by a traced gather --------------------------------------------

def _grad_gather_raw(index, **kw):
    state = ops.new_state()
    state, h, flow = ops.TensorArrayV3(state, 2, f32, element_shape=(), tensor_array_name="foo", **kw)
    state, gh, _ = ops.TensorArrayGradV3(state, h, flow, "gradients")
    return ops.TensorArrayGatherV3(state, gh, jnp.stack([jnp.asarray(4, jnp.asarray(index).dtype), index]),
                                   flow, f32)


def _grad_gather_api(index, **kw):
    ta = jta.TensorArray(f32, size=2, element_shape=(), tensor_array_name="foo", **kw)
    _, g, _ = ta.grad("gradients", {})
    return g.gather(jnp.stack([jnp.asarray(4, jnp.asarray(index).dtype), index]))


GROWN = "Tried to read from index -1 but array size is: 5"  # TensorFlow's text (see the test below)


@pytest.mark.parametrize("kw", [dict(capacity=8), dict(dynamic_size=True, capacity=8)])
@pytest.mark.parametrize("gather", [_grad_gather_raw, _grad_gather_api])
def test_gradient_array_grows_within_a_traced_gather(gather, kw):
    """ReadMany grows a gradient array as it reads past its size: index 4 makes the size 5, so
    the failing index -1 after it reports size 5 (the static size 2 too)."""
    assert _error(assert_agree(lambda i: gather(i, **kw), -1)) == ("InvalidArgumentError", GROWN)
    assert assert_agree(lambda i: gather(i, **kw), 1)[0] is None


def test_gradient_array_growth_text_is_tensorflows():
    tf = pytest.importorskip("tensorflow")
    raw = tf.raw_ops
    h, flow = raw.TensorArrayV3(size=2, dtype=tf.float32, element_shape=[])
    gh, gflow = raw.TensorArrayGradV3(handle=h, flow_in=flow, source="gradients")
    with pytest.raises(tf.errors.InvalidArgumentError, match=GROWN):
        raw.TensorArrayGatherV3(handle=gh, indices=[4, -1], flow_in=gflow, dtype=tf.float32)


# -- 5. raw-op value ops under a bare jit, their state dropped --------------------------------

def _raw(size=3, element_shape=()):
    """A raw-op array of ``size`` slots holding 10, 11, ... (element shape ``element_shape``)."""
    state = ops.new_state()
    state, h, flow = ops.TensorArrayV3(state, size, f32, element_shape=element_shape, tensor_array_name="foo")
    values = jnp.arange(size * int(np.prod(element_shape)), dtype=f32).reshape((size, *element_shape)) + 10
    state, flow = ops.TensorArrayScatterV3(state, h, jnp.arange(size), values, flow)
    return state, h, flow


def _read(i):
    state, h, flow = _raw()
    return ops.TensorArrayReadV3(state, h, i, flow, f32)[1]


def _gather(i):
    state, h, flow = _raw()
    return ops.TensorArrayGatherV3(state, h, jnp.stack([i * 0, i]), flow, f32)[1]


def _concat_after_read(i):
    state, h, flow = _raw(element_shape=(1,))
    state, _ = ops.TensorArrayReadV3(state, h, i, flow, f32)
    return ops.TensorArrayConcatV3(state, h, flow, f32)[1]


def _read_twice(i):
    state, h, flow = _raw()
    state, _ = ops.TensorArrayReadV3(state, h, i, flow, f32)
    return ops.TensorArrayReadV3(state, h, i, flow, f32)[1]


def _write_then_read(i):
    """An out-of-range write, then a valid read of the slot the write was clamped into."""
    state = ops.new_state()
    state, h, flow = ops.TensorArrayV3(state, 3, f32, element_shape=(), tensor_array_name="foo")
    state, flow = ops.TensorArrayWriteV3(state, h, i, 7.0, flow)
    return ops.TensorArrayReadV3(state, h, 2, flow, f32)[1]


def _write_grad(i):
    ta = jta.TensorArray(f32, size=3, element_shape=(), tensor_array_name="foo")
    return gradients.write_grad({}, ta, i, "gradients")[1]


def _scatter_grad(i):
    ta = jta.TensorArray(f32, size=3, element_shape=(), tensor_array_name="foo")
    grads = gradients.read_grad({}, ta, i, 1.0, "gradients")  # out of range: the accumulator holds the error
    return gradients.unstack_grad(grads, ta, "gradients")[1]


def _split_grad(i):
    ta = jta.TensorArray(f32, size=2, element_shape=(1,), tensor_array_name="foo").split(jnp.ones(2), [1, 1])
    grads = gradients.read_grad({}, ta, i, jnp.ones(1), "gradients")
    return gradients.split_grad(grads, ta, "gradients")[1]


VALUE_OPS = {
    # id: (program of a traced index, a failing index, a valid one, eager code's error text)
    "read": (_read, 5, 1, "Tried to read from index 5 but array size is: 3"),
    "gather": (_gather, 5, 2, "Tried to read from index 5 but array size is: 3"),
    "concat-after-read": (_concat_after_read, 5, None, "Tried to read from index 5 but array size is: 3"),
    "concat-of-a-cleared-slot": (_concat_after_read, 1, None,
                                 "TensorArray foo_0: Could not read index 1 twice because it was cleared after a "
                                 "previous read (perhaps try setting clear_after_read = false?)."),
    "read-a-cleared-slot": (_read_twice, 1, None,
                            "TensorArray foo_0: Could not read index 1 twice because it was cleared after a previous "
                            "read (perhaps try setting clear_after_read = false?)."),
    "write-out-of-range-then-read": (_write_then_read, 9, 2, "TensorArray foo_0: Tried to write to index 9 but array "
                                     "is not resizeable and size is: 3"),
    "write_grad": (_write_grad, -1, 1, "Tried to read from index -1 but array size is: 3"),
    "unstack_grad": (_scatter_grad, 7, 1, "TensorArray foo@gradients: Tried to write to index 7 but array is not "
                     "resizeable and size is: 3"),
    "split_grad": (_split_grad, -1, 0, "TensorArray foo@gradients: Tried to write to index -1 but array is not "
                   "resizeable and size is: 2"),
}


@pytest.mark.parametrize("case", list(VALUE_OPS))
def test_value_op_reports_its_arrays_record_under_a_bare_jit(case):
    """A raw-op value op returns a value and a state; when the state is dropped, the value op's
    own check must report the error (as ``TensorArray.read`` does), not a clamped value."""
    program, bad, good, text = VALUE_OPS[case]
    assert _error(assert_agree(program, bad))[1] == text
    with pytest.raises(jax.errors.JaxRuntimeError):
        jax.block_until_ready(jax.jit(program)(jnp.asarray(bad)))
    with pytest.raises(jta.errors.InvalidArgumentError) as info:
        jta.throw()
    assert str(info.value) == text
    if good is not None:
        assert assert_agree(program, good)[0] is None
