"""Jitted step functions that take and return a TensorArray with ``donate_argnums``: the array's
buffers are updated in place across calls and the donated inputs become invalid."""

from __future__ import annotations

import functools
import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jta
from jta import raw_ops as ops
from tests.helpers.internals import buffer_of, flags_of


def _leaves(tree):
    return [x for x in jax.tree_util.tree_leaves(tree) if isinstance(x, jax.Array)]


@pytest.fixture(autouse=True)
def _unusable_donation_is_an_error():
    # JAX warns "Some donated buffers were not usable" when it cannot alias a donated input.
    with warnings.catch_warnings():
        warnings.filterwarnings("error", message=".*donated buffers were not usable.*")
        yield


@functools.partial(jax.jit, donate_argnums=0)
def _write_step(ta, t, x):
    return ta.write(t, 2.0 * x)


def test_write_step_updates_in_place():
    ta = jta.TensorArray(jnp.float32, size=5, element_shape=(3,), tensor_array_name="buf")
    for t in range(5):
        old, pointer = ta, buffer_of(ta).unsafe_buffer_pointer()
        ta = _write_step(ta, jnp.int32(t), jnp.full((3,), t, jnp.float32))
        assert all(x.is_deleted() for x in _leaves(old)), "every donated leaf is consumed"
        assert not any(x.is_deleted() for x in _leaves(ta))
        assert buffer_of(ta).unsafe_buffer_pointer() == pointer, "the buffer is reused, not copied"
    np.testing.assert_array_equal(ta.stack(), 2.0 * np.repeat(np.arange(5.0)[:, None], 3, 1))
    assert ta.error is None
    with pytest.raises((RuntimeError, ValueError), match="deleted"):  # the class depends on the path
        old.stack()
    assert "deleted" in repr(old)
    assert "[W W W W W]" in repr(ta)


def test_scan_chunks_with_carry_and_donation():
    """A training-loop shape: each call runs a chunk of steps of a recurrence inside lax.scan."""
    steps, chunk = 8, 4
    W = jnp.eye(2) * 0.9

    @functools.partial(jax.jit, donate_argnums=(0, 1))
    def run_chunk(ta, h, start):
        def body(carry, k):
            ta, h = carry
            h = jnp.tanh(h @ W + 1.0)
            return (ta.write(start + k, h), h), None
        (ta, h), _ = jax.lax.scan(body, (ta, h), jnp.arange(chunk))
        return ta, h

    ta = jta.TensorArray(jnp.float32, size=steps, element_shape=(2,))
    h = jnp.zeros(2)
    for start in range(0, steps, chunk):
        old_ta, old_h = ta, h
        ta, h = run_chunk(ta, h, start)
        assert buffer_of(old_ta).is_deleted() and flags_of(old_ta).is_deleted() and old_h.is_deleted()

    expected, hh = [], np.zeros(2, np.float32)
    for _ in range(steps):
        hh = np.tanh(hh @ np.asarray(W) + 1.0)
        expected.append(hh)
    np.testing.assert_allclose(ta.stack(), np.stack(expected), rtol=1e-6)
    jta.throw(ta)


def test_donated_loop_records_errors():
    ta = jta.TensorArray(jnp.float32, size=2, element_shape=(), tensor_array_name="small")
    ta = _write_step(ta, jnp.int32(0), jnp.float32(1.0))
    ta = _write_step(ta, jnp.int32(0), jnp.float32(1.0))  # written twice: recorded, not raised
    assert "!" in repr(ta)
    with pytest.raises(jta.errors.InvalidArgumentError, match="already been written to"):
        jta.throw(ta)


def test_raw_ops_state_donation():
    state = ops.new_state()
    state, handle, flow = ops.TensorArrayV3(state, 3, jnp.float32, element_shape=(2,), tensor_array_name="s")

    @functools.partial(jax.jit, donate_argnums=0)
    def write(state, i, v):
        state, _ = ops.TensorArrayWriteV3(state, handle, i, v, 0.0)
        return state

    for i in range(3):
        old = state
        state = write(state, jnp.int32(i), jnp.full((2,), i + 1.0))
        assert all(x.is_deleted() for x in _leaves(old))
    state, value = ops.TensorArrayGatherV3(state, handle, np.arange(3), flow, jnp.float32)
    np.testing.assert_array_equal(value, [[1, 1], [2, 2], [3, 3]])
