"""Every op at *traced* indices and values — eagerly, under ``jax.jit``, in a ``lax.scan`` body
and under ``jax.disable_jit()`` — through ``jta.raw_ops`` and ``jta.TensorArray``, for 32- and
64-bit dtypes (64-bit ones inside ``jax.enable_x64``, restored afterwards); arrays carried
through ``lax.scan``/``fori_loop``/``while_loop``."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax

import jta
from jta import raw_ops as ops
from tests.helpers import APIS, MODES, pytree, run, x64_if

pytestmark = pytest.mark.rotate("mode")  # each case in one mode by default, all under --long

DTYPES = [np.float32, np.int32, np.complex64, np.bool_, np.float64, np.int64, np.complex128]


def _values(dtype):
    x = np.arange(1.0, 7.0).reshape(3, 2)
    if np.dtype(dtype) == np.bool_:
        return np.array([[True, False], [False, True], [True, True]])
    if np.dtype(dtype).kind == "c":
        x = x - 1j * x
    return x.astype(dtype)


def _every_op(make, dtype):
    def f(perm, vals, i, lengths):
        scattered = make(dtype, 3, element_shape=(2,), clear_after_read=False).scatter(perm, vals)
        written = make(dtype, 3, element_shape=(2,)).write(i, vals[0])
        split = make(dtype, 3).split(vals, lengths)
        unstacked = make(dtype, 3).unstack(vals)
        out = dict(read=scattered.read(i), gather=scattered.gather(perm[::-1]), stack=scattered.stack(),
                   written=written.stack(), size=written.size(), concat=split.concat(),
                   unstacked=unstacked.read(i))
        return out, [pytree(ta) for ta in (scattered, written, split, unstacked)]
    return f


@pytest.mark.parametrize("api", list(APIS))
@pytest.mark.parametrize(("dtype", "mode"), [  # (compile time) all modes for float32/float64
    pytest.param(d, m, id=f"{np.dtype(d).name}-{m}")
    for d in DTYPES for m in (MODES if d in (np.float32, np.float64) else ("jit",))])
def test_every_op_at_traced_indices(api, mode, dtype):
    vals = _values(dtype)
    perm, i = np.int32([2, 0, 1]), np.int32(1)
    with x64_if(dtype):
        out, arrays = run(mode, _every_op(APIS[api], dtype), perm, vals, i, np.int32([1, 1, 1]))
        jta.throw(arrays)  # nothing went wrong
        by_index = np.empty_like(vals)
        by_index[perm] = vals
        expected = dict(read=by_index[i], gather=by_index[perm[::-1]], stack=by_index,
                        written=np.where(np.arange(3)[:, None] == i, vals[0], np.zeros_like(vals)),
                        size=3, concat=vals, unstacked=vals[i])
        for key, want in expected.items():
            got = np.asarray(out[key])
            np.testing.assert_array_equal(got, want, err_msg=key)
            assert got.dtype == (np.int32 if key == "size" else np.dtype(dtype)), key


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("api", list(APIS))
def test_recurrence_carried_through_scan(api, mode):
    # h_t = 0.5 * h_{t-1} + x_t, with h_{t-1} read back from the array at a traced index.
    def f(xs):
        # (clear_after_read=False: in K the final stack re-reads the slots read in the loop)
        ta = APIS[api](jnp.float32, 4, element_shape=(2,), clear_after_read=False).write(0, xs[0])

        def step(carry, t):
            if api == "raw":  # the raw state is the loop carry; the handle is static
                ta.state = carry
                return pytree(ta.write(t, 0.5 * ta.read(t - 1) + jnp.asarray(xs)[t])), None
            return carry.write(t, 0.5 * carry.read(t - 1) + jnp.asarray(xs)[t]), None

        carry, _ = lax.scan(step, pytree(ta), jnp.arange(1, 4))
        if api == "raw":
            ta.state = carry
        else:
            ta = carry
        return ta.stack(), pytree(ta)

    xs = np.arange(8.0, dtype=np.float32).reshape(4, 2)
    stacked, arrays = run(mode, f, xs)
    jta.throw(arrays)
    h, expected = np.zeros(2), []
    for x in xs:
        h = 0.5 * h + x
        expected.append(h)
    np.testing.assert_allclose(stacked, expected, rtol=1e-6)


def test_raw_state_through_while_loop_and_fori_loop():
    def f(n, x):
        s, h, flow = ops.TensorArrayV3(ops.new_state(), 5, jnp.float32, element_shape=(), tensor_array_name="foo")

        def body(carry):
            s, flow, k = carry
            s, flow = ops.TensorArrayWriteV3(s, h, k, x * k, flow)
            return s, flow, k + 1

        s, flow, k = lax.while_loop(lambda c: c[2] < n, body, (s, flow, jnp.int32(0)))

        def add(j, carry):
            s, total = carry
            s, v = ops.TensorArrayReadV3(s, h, j, flow, jnp.float32)
            return s, total + v

        s, total = lax.fori_loop(0, n, add, (s, jnp.float32(0)))
        s, size = ops.TensorArraySizeV3(s, h, flow)
        return s, total, size

    s, total, size = jax.jit(f)(np.int32(4), np.float32(2))
    jta.throw(s)
    assert (float(total), int(size)) == (2.0 * (0 + 1 + 2 + 3), 5)


@pytest.mark.parametrize("mode", MODES)
def test_dynamic_array_grows_at_traced_indices_up_to_capacity(mode):
    def f(xs):
        ta = jta.TensorArray(jnp.float32, 0, dynamic_size=True, capacity=8, element_shape=())
        ta, _ = lax.scan(lambda ta, t: (ta.write(t, jnp.asarray(xs)[t]), None), ta, jnp.arange(xs.shape[0]))
        return ta

    ta = jta.throw(run(mode, f, np.float32([3, 1, 4, 1, 5])))
    assert int(ta.size()) == 5
    np.testing.assert_array_equal(ta.stack(), [3, 1, 4, 1, 5])


@pytest.mark.parametrize("mode", MODES)
def test_x64_concat_lengths_are_int64_and_float64_keeps_precision(mode):
    def f(a, b):
        s, h, flow = ops.TensorArrayV3(ops.new_state(), 2, jnp.float64, identical_element_shapes=False)
        s, flow = ops.TensorArrayWriteV3(s, h, 0, a, flow)
        s, flow = ops.TensorArrayWriteV3(s, h, 1, b, flow)
        s, value, lengths = ops.TensorArrayConcatV3(s, h, flow, jnp.float64)
        return value, lengths

    with x64_if(np.float64):
        value, lengths = run(mode, f, np.float64([1 + 1e-12, 2]), np.float64([3]))
        assert value.dtype == np.float64 and lengths.dtype == np.int64
        np.testing.assert_array_equal(value, [1 + 1e-12, 2, 3])
        np.testing.assert_array_equal(lengths, [2, 1])
    assert not jax.config.jax_enable_x64  # restored
