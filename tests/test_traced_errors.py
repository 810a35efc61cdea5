"""Errors at traced indices (spec cases 14, 15, 17-19, 23, 32, 78, 79 with the index computed
inside ``jit``/``lax.scan``): recorded in the array's pytree and raised by ``jta.throw`` with
the exact mode-K class and text; raised at once in eager code and under ``jax.disable_jit()``.

Every index below is a function *argument*, so it is traced under ``jit`` and ``scan``.
"""

from __future__ import annotations

import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax

import jta
from jta import raw_ops as ops
from jta.errors import InvalidArgumentError
from tests.helpers import APIS, MODES, NAMES, RawTA, expect_error, k_text, pytree, run, x64_if
from tests.helpers.errors import run_reporting

pytestmark = pytest.mark.rotate("mode")  # each case in one mode by default, all under --long

f32 = jnp.float32
ONES = np.ones((3, 2), np.float32)


def runtime_text(text, name="foo"):
    """The line JAX's runtime error carries for an exception raised by jta inside compiled code."""
    return "(?m)^InvalidArgumentError: " + re.escape(text).replace("NAME", name) + "$"


def _dense(make, size=3, **kw):
    """A size-3 array whose element shape ``(2,)`` is known, so traced indices are allowed."""
    return make(f32, size, tensor_array_name="foo", element_shape=(2,), **kw)


def _read(ta, index):
    value = ta.read(index)
    return ta, value


def _gather(ta, indices):
    value = ta.gather(indices)
    return ta, value


WRITE_CASES = {
    # id: (build(make, *indices) -> array, indices, K text with NAME for the array name)
    "14-write-negative": (lambda make, i: _dense(make).write(i, ONES[0]), (-1,),
                          "TensorArray NAME: Tried to write to index -1 but array is not resizeable and size is: 3"),
    "15-write-past-end": (lambda make, i: _dense(make).write(i, ONES[0]), (3,),
                          "TensorArray NAME: Tried to write to index 3 but array is not resizeable and size is: 3"),
    "19-write-twice": (lambda make, i, j: _dense(make).write(i, ONES[0]).write(j, ONES[1]), (2, 2),
                       "TensorArray NAME: Could not write to TensorArray index 2 because it has already been "
                       "written to."),
    # (traced lengths must cut equal pieces: here 3 rows into 3 pieces of shape (1, 2))
    "23-split-lengths-sum": (lambda make, lengths: make(f32, 3, tensor_array_name="foo").split(ONES, lengths),
                             (np.int32([1, 1, 2]),),
                             "Expected sum of lengths to be equal to values.shape[0], but sum of lengths is 4 and "
                             "value's shape is: [3,2]"),
    "78-scatter-duplicate-index": (lambda make, idx: _dense(make).scatter(idx, ONES), (np.int32([1, 0, 0]),),
                                   "TensorArray NAME: Could not write to TensorArray index 0 because it has already "
                                   "been written to."),
    "78-scatter-past-end": (lambda make, idx: _dense(make).scatter(idx, ONES[:1]), (np.int32([5]),),
                            "Max scatter index must be < array size (5 vs. 3)"),
    "78-scatter-negative": (lambda make, idx: _dense(make).scatter(idx, ONES[:2]), (np.int32([0, -1]),),
                            "TensorArray NAME: Tried to write to index -1 but array is not resizeable and size is: 3"),
}


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("api", list(APIS))
@pytest.mark.parametrize("case", list(WRITE_CASES))
def test_write_errors_at_traced_indices(api, mode, case):
    build, indices, text = WRITE_CASES[case]
    expect_error(mode, lambda *idx: build(APIS[api], *idx), InvalidArgumentError, k_text(text, NAMES[api]),
                 *(np.asarray(i, np.int32) if np.ndim(i) == 0 else i for i in indices))


READ_CASES = {
    # id: (build(make, *indices) -> (array, value), indices, K text, APIs it applies to)
    "17-read-negative": (lambda make, i: _read(_dense(make).write(0, ONES[0]), i), (-1,),
                         "Tried to read from index -1 but array size is: 3", ("raw", "ta")),
    "18-read-past-end": (lambda make, i: _read(_dense(make).write(0, ONES[0]), i), (3,),
                         "Tried to read from index 3 but array size is: 3", ("raw", "ta")),
    "gather-past-end": (lambda make, idx: _gather(_dense(make).write(0, ONES[0]), idx), (np.int32([0, 5]),),
                        "Tried to read from index 5 but array size is: 3", ("raw", "ta")),
    # K only: jta.TensorArray.read does not clear or mark slots.
    "32-read-twice": (lambda make, i, j: _read(_read(_dense(make).unstack(ONES), i)[0], j), (0, 0),
                      "TensorArray NAME: Could not read index 0 twice because it was cleared after a previous read "
                      "(perhaps try setting clear_after_read = false?).", ("raw",)),
    "32-gather-repeated-index": (lambda make, idx: _gather(_dense(make).unstack(ONES), idx), (np.int32([0, 0]),),
                                 "TensorArray NAME: Could not read index 0 twice because it was cleared after a "
                                 "previous read (perhaps try setting clear_after_read = false?).", ("raw",)),
    "79-write-after-read": (lambda make, i, j: (_read(_dense(make), i)[0].write(j, ONES[0]), None), (1, 1),
                            "TensorArray NAME: Could not write to TensorArray index 1 because it has already been "
                            "read.", ("raw",)),
}


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize(("case", "api"), [(c, a) for c, v in READ_CASES.items() for a in v[3]])
def test_read_errors_at_traced_indices(api, mode, case):
    build, indices, text, _ = READ_CASES[case]
    args = [np.asarray(i, np.int32) for i in indices]
    pattern = k_text(text, NAMES[api])
    if api == "raw":  # the raw read returns the state: its error record reaches jta.throw
        expect_error(mode, lambda *idx: build(RawTA, *idx)[0], InvalidArgumentError, pattern, *args)
    elif mode in ("eager", "disable_jit", "scan"):  # concrete, or an eager scan: raises when it returns
        with pytest.raises(InvalidArgumentError, match=pattern):
            run(mode, lambda *idx: build(jta.TensorArray, *idx)[1], *args)
    else:  # jta.TensorArray.read returns only a value: compiled code raises when it runs
        with pytest.raises(jax.errors.JaxRuntimeError, match=runtime_text(text, NAMES[api])):
            jax.block_until_ready(run(mode, lambda *idx: build(jta.TensorArray, *idx)[1], *args))


@pytest.mark.parametrize("api", list(APIS))
def test_no_error_throw_returns_the_tree(api):
    def f(i, j):
        ta = _dense(APIS[api]).write(i, ONES[0]).write(j, ONES[1])
        return pytree(ta), ta.read(i)

    out = run("jit", f, np.int32(0), np.int32(2))
    assert jta.throw(out) is out
    np.testing.assert_array_equal(out[1], ONES[0])


def test_first_recorded_error_wins():
    def f(i, j):
        return jta.TensorArray(f32, 3, element_shape=(), tensor_array_name="foo").write(i, 1.0).write(j, 1.0)

    with pytest.raises(InvalidArgumentError, match=k_text(
            "TensorArray NAME: Tried to write to index 5 but array is not resizeable and size is: 3", "foo")):
        jta.throw(run("jit", f, np.int32(5), np.int32(7)))


def test_errors_recorded_in_a_scan_loop_are_thrown_after_it():
    def write_all(indices):
        def step(ta, i):
            return ta.write(i, jnp.float32(i)), None

        ta, _ = lax.scan(step, jta.TensorArray(f32, 3, element_shape=(), tensor_array_name="foo"), indices)
        return ta

    ok = jax.jit(write_all)(np.int32([2, 0, 1]))
    np.testing.assert_array_equal(jta.throw(ok).stack(), [0.0, 1.0, 2.0])
    with pytest.raises(InvalidArgumentError, match=k_text(
            "TensorArray NAME: Could not write to TensorArray index 1 because it has already been written to.", "foo")):
        jta.throw(jax.jit(write_all)(np.int32([0, 1, 1])))
    with pytest.raises(InvalidArgumentError, match=k_text(
            "TensorArray NAME: Tried to write to index 3 but array is not resizeable and size is: 3", "foo")):
        jta.throw(jax.jit(write_all)(np.int32([0, 3, 1])))


def test_raw_state_carried_through_fori_loop_records_a_cleared_read():
    # Reads at loop-computed indices 0, 1, 1: the third read meets the slot cleared by the second.
    def f(start):
        s, h, flow = ops.TensorArrayV3(ops.new_state(), 3, f32, element_shape=(2,), tensor_array_name="foo")
        s, flow = ops.TensorArrayScatterV3(s, h, np.arange(3), ONES, flow)

        def body(k, carry):
            s, total = carry
            s, v = ops.TensorArrayReadV3(s, h, jnp.minimum(start + k, 1), flow, f32)
            return s, total + v

        return lax.fori_loop(0, 3, body, (s, jnp.zeros(2, f32)))

    # Each read reports its error when it runs (a value op): the loop raises at its first failure.
    with pytest.raises(InvalidArgumentError, match=k_text(
            "TensorArray NAME: Could not read index 1 twice because it was cleared after a previous read "
            "(perhaps try setting clear_after_read = false?).")):
        jta.throw(run_reporting("jit", f, np.int32(0)))
    with pytest.raises(InvalidArgumentError, match=k_text("Tried to read from index -2 but array size is: 3")):
        jta.throw(run_reporting("jit", f, np.int32(-2)))  # reads -2, -1, 0: the first failure


def test_errors_at_traced_int64_indices_under_x64():
    def f(i, v):
        return jta.TensorArray(jnp.float64, 3, element_shape=(2,), tensor_array_name="foo").write(i, v)

    with x64_if(np.int64):
        ta = jax.jit(f)(np.int64(1), np.float64([1.5, 2.5]))
        assert ta.stack().dtype == np.float64
        np.testing.assert_array_equal(jta.throw(ta).stack(), [[0, 0], [1.5, 2.5], [0, 0]])
        with pytest.raises(InvalidArgumentError, match=k_text(
                "TensorArray NAME: Tried to write to index 4 but array is not resizeable and size is: 3", "foo")):
            jta.throw(jax.jit(f)(np.int64(4), np.float64([1.5, 2.5])))


def test_runtime_error_text_names_the_tf_class():
    # A value-returning op inside jit raises at run time; the message carries class and text.
    @jax.jit
    def f(i):
        return jta.TensorArray(f32, 3, element_shape=(), tensor_array_name="foo").gather(jnp.stack([i, i]))

    np.testing.assert_array_equal(f(np.int32(1)), [0.0, 0.0])
    with pytest.raises(jax.errors.JaxRuntimeError,
                       match=runtime_text("Tried to read from index -4 but array size is: 3")):
        jax.block_until_ready(f(np.int32(-4)))


def test_throw_names_the_failed_run_not_an_error_left_behind():
    """``jta.throw()`` after a bare jit's ``JaxRuntimeError`` gives that run's error, even when an
    earlier run's error (traced earlier: first in trace order) was never taken, and whichever
    thread XLA called back on."""
    def reader(size):
        ta = jta.TensorArray(jnp.float32, size=size, element_shape=()).unstack(jnp.arange(float(size)))
        return jax.jit(lambda i: ta.read(i))

    left_behind, failing = reader(2), reader(3)
    with pytest.raises(jax.errors.JaxRuntimeError):
        jax.block_until_ready(left_behind(7))  # handled without jta.throw(): its error stays
    for index in (5, 9):
        try:
            jax.block_until_ready(failing(index))
        except jax.errors.JaxRuntimeError:
            with pytest.raises(InvalidArgumentError, match=f"index {index} but array size is: 3"):
                jta.throw()
        else:
            pytest.fail("no error")
    assert jta.throw() is None  # taken: nothing left


# Value ops whose record is checked at run time under a bare jit, each failing at its traced
# index ``i`` (out of range for the size-3 or size-2 array it is given).
VALUE_OPS = {
    "read": lambda ta, n, i: ta.read(i),
    "gather": lambda ta, n, i: ta.gather(jnp.stack([i, 0])).sum(),
    "stack": lambda ta, n, i: jta.TensorArray(f32, size=n, element_shape=()).write(i, 1.0).stack()[0],
    "throw": lambda ta, n, i: jta.throw(jta.TensorArray(f32, size=n, element_shape=()).write(i, 1.0)).read(i),
}


@pytest.mark.parametrize("second", sorted(VALUE_OPS))
@pytest.mark.parametrize("first", sorted(VALUE_OPS))
def test_bare_jit_raises_the_first_failing_op_of_a_body_in_program_order(first, second):
    """XLA runs independent callbacks in any order and stops at the first that raises; each
    check of a function body raises the first error of the body so far, so the run reports
    the op that failed first in program order, whichever callback ran first."""
    def f(x, i, j):
        a = jta.TensorArray(f32, size=3, element_shape=(), tensor_array_name="a").unstack(jnp.arange(3.0) + x)
        b = jta.TensorArray(f32, size=2, element_shape=(), tensor_array_name="b").unstack(jnp.arange(2.0) + x)
        return VALUE_OPS[first](a, 3, i) + VALUE_OPS[second](b, 2, j)

    index = 7
    expected = (f"Tried to write to index {index} but array is not resizeable and size is: 3"
                if first in ("throw", "stack")
                else f"Tried to read from index {index} but array size is: 3")
    for i, j in ((7, 9), (7, 1)):
        with pytest.raises(jax.errors.JaxRuntimeError):
            jax.block_until_ready(jax.jit(f)(1.0, i, j))
        with pytest.raises(InvalidArgumentError, match=re.escape(expected)):
            jta.throw()
    with pytest.raises(InvalidArgumentError, match="index 9 but array"):  # the second alone
        try:
            jax.block_until_ready(jax.jit(f)(1.0, 0, 9))
        except jax.errors.JaxRuntimeError:
            jta.throw()
