"""``TensorArray.stack_padded()``: every allocated slot and the size, also when the size of a
``dynamic_size`` array is only known at run time (a decoder's outputs out of compiled code)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jta


def growing(n, capacity=6):
    """A dynamic array written at 0..n-1 inside a while_loop: its size is traced under jit."""
    ta = jta.TensorArray(jnp.float32, size=0, dynamic_size=True, capacity=capacity, element_shape=(2,))

    def body(carry):
        t, ta = carry
        return t + 1, ta.write(t, jnp.full((2,), t + 1.0))

    _, ta = jax.lax.while_loop(lambda c: c[0] < n, body, (jnp.int32(0), ta))
    return ta


def expected(n, capacity=6):
    values = np.zeros((capacity, 2), np.float32)
    values[:n] = np.arange(1, n + 1, dtype=np.float32)[:, None]
    return values


def check(result, n, capacity=6):
    values, size = result
    np.testing.assert_array_equal(np.asarray(values), expected(n, capacity))
    assert values.dtype == jnp.float32 and size.dtype == jnp.int32 and int(size) == n


@pytest.mark.parametrize("n", [0, 1, 4, 6])
def test_eager_and_jit_and_checked_agree(n):
    padded = lambda n: growing(n).stack_padded()  # noqa: E731
    check(padded(n), n)
    check(jax.jit(padded)(n), n)
    check(jta.checked(padded)(n), n)
    errors, out = jax.jit(jta.checkify(padded))(n)
    assert errors.exception is None
    check(out, n)
    with jax.disable_jit():
        check(padded(n), n)


def test_jit_returns_array_then_stack_outside():
    ta = jax.jit(growing)(4)
    np.testing.assert_array_equal(np.asarray(ta.stack()), expected(4)[:4])
    check(ta.stack_padded(), 4)


def test_stack_raises_inside_jit_with_a_traced_size():
    with pytest.raises(ValueError, match="only known at run time"):
        jax.jit(lambda n: growing(n).stack())(3)


def test_vmap_gives_a_batch_of_padded_values_and_sizes():
    values, sizes = jax.jit(jax.vmap(lambda n: growing(n).stack_padded()))(jnp.array([0, 2, 5]))
    np.testing.assert_array_equal(np.asarray(sizes), [0, 2, 5])
    for k, n in enumerate([0, 2, 5]):
        np.testing.assert_array_equal(np.asarray(values[k]), expected(n))


def test_static_size_pads_to_the_capacity():
    ta = jta.TensorArray(jnp.float32, size=2, element_shape=(2,)).unstack(jnp.ones((2, 2)))
    values, size = ta.stack_padded()
    assert values.shape == (2, 2) and int(size) == 2
    grown = jta.TensorArray(jnp.float32, size=0, dynamic_size=True).write(2, jnp.ones(3))  # eager growth
    values, size = grown.stack_padded()
    assert int(size) == 3 and values.shape == (grown.capacity, 3)
    np.testing.assert_array_equal(np.asarray(values[:3]), np.asarray(grown.stack()))
    assert not np.asarray(values[3:]).any()


def test_gradient_flows_to_the_written_rows_only():
    def loss(x, n):
        ta = jta.TensorArray(jnp.float32, size=0, dynamic_size=True, capacity=4, element_shape=())

        def step(ta, i):  # writes while i < n: the size is traced
            return jax.lax.cond(i < n, lambda: ta.write(i, x * (i + 1.0)), lambda: ta), None

        ta, _ = jax.lax.scan(step, ta, jnp.arange(4))
        values, _ = ta.stack_padded()
        return jnp.sum(values)

    assert float(jax.jit(jax.grad(loss))(2.0, 3)) == pytest.approx(6.0)


def test_errors_held_by_the_array_surface():
    over = lambda n: growing(n, capacity=3).stack_padded()  # noqa: E731
    with pytest.raises(jta.errors.InvalidArgumentError, match="beyond the static capacity 3"):
        over(4)
    with pytest.raises(jta.errors.InvalidArgumentError, match="beyond the static capacity 3"):
        jta.checked(over)(4)
    errors, _ = jax.jit(jta.checkify(over))(4)
    assert isinstance(errors.exception, jta.errors.InvalidArgumentError)


def test_closed_array_raises():
    ta = jta.TensorArray(jnp.float32, size=1, element_shape=()).close()
    with pytest.raises(jta.errors.InvalidArgumentError, match="has already been closed"):
        ta.stack_padded()


def test_a_capacity_without_an_element_shape():
    """The capacity's slots are one buffer of the element shape. With infer_shape the first write fixes
    that shape and the buffer (the first write was refused as past a capacity of 0); with infer_shape=False
    the first write is refused with what to pass. Eagerly, under jit and checked."""
    def writes(x, infer_shape):
        ta = jta.TensorArray(jnp.float32, size=0, dynamic_size=True, capacity=4, infer_shape=infer_shape)
        return ta.write(0, x).write(1, 2 * x).stack_padded()

    for run in (writes, jax.jit(writes, static_argnums=1), jta.checked(writes, static_argnums=1)):
        values, size = run(jnp.ones(3), True)
        np.testing.assert_array_equal(values, [[1, 1, 1], [2, 2, 2], [0, 0, 0], [0, 0, 0]])
        assert int(size) == 2
        with pytest.raises(ValueError, match=r"a dynamic_size array with a capacity keeps its capacity slots in "
                                             r"one buffer, so its element shape must be known .* Pass element_shape="):
            run(jnp.ones(3), False)
