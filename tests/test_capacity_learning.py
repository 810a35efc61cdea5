"""``jta.checked`` learns the sizes the data decides (``jta._core.capacities``).

A ``jta.while_loop`` differentiated without ``maximum_iterations``, the gradient stacks of an
imported loop (``tests/test_graph_import.py``) and a ``dynamic_size`` ``TensorArray`` created
without ``capacity=`` get their sizes from a plan that ``jta.checked`` grows when a run outgrows
it, compiling again and rerunning; later calls of the same shapes compile nothing. Each test
counts the traces (the compilations) and checks values against a program given its sizes
statically. A bare ``jax.jit`` refuses at trace time, naming ``jta.checked``; with donated
arguments the call cannot be rerun, so the record is raised.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jta
from jta import errors, gradients
from jta._records.catalogue import Error


def _counted(f, traces):
    def run(*args):
        traces.append(1)
        return f(*args)
    return run


def _doubles(n):
    """A dynamic_size array without capacity written at traced indices ``0..n-1``."""
    ta = jta.TensorArray(jnp.float32, size=0, dynamic_size=True, element_shape=())
    ta = jax.lax.fori_loop(0, n, lambda i, ta: ta.write(i, 2.0 * i), ta)
    return ta.stack(), ta.size()


def test_a_dynamic_array_without_capacity_grows_under_checked():
    traces = []
    f = jta.checked(_counted(_doubles, traces))
    for n, new_traces in ((5, 3), (5, 0), (300, 1), (7, 1), (300, 0)):
        before = len(traces)
        values, size = f(n)
        np.testing.assert_array_equal(values, 2.0 * np.arange(n, dtype=np.float32))  # exactly size() rows
        assert int(size) == n
        # first call: the static trace that needs a buffer, the buffered one, then stack()'s size;
        # 300 > 256 rows: the run learns the rows and stack()'s size at once; each new size: stack() compiles for it
        assert len(traces) - before == new_traces, (n, len(traces) - before)


def test_bare_jit_refuses_naming_checked():
    with pytest.raises(errors.UnimplementedError, match="needs a static capacity.*capacity=N.*jta.checked"):
        jax.jit(_doubles)(5)


def _decode(W, h0, capacity=None, bound=None):
    ta = jta.TensorArray(jnp.float32, size=0, dynamic_size=True, element_shape=(2,), capacity=capacity)

    def body(s):
        i, h, ta = s
        h = jnp.tanh(h @ W)
        return i + 1, h, ta.write(i, h)

    _, _, ta = jta.while_loop(lambda s: jnp.sum(s[1] ** 2) > 0.05, body, (0, h0, ta), maximum_iterations=bound)
    values = ta.stack() if capacity is None else ta.stack_padded()[0]
    return jnp.sum(values ** 2)


W = np.array([[0.9, -0.3], [0.2, 0.8]], np.float32)


@pytest.mark.parametrize("h0", [[1.0, 0.5], [3.0, -2.0]])
def test_a_decoder_with_no_capacity_and_no_bound_differentiates_under_checked(h0):
    h0 = np.float32(h0)
    got = jta.checked(jax.value_and_grad(_decode))(W, h0)
    want = jax.jit(jax.value_and_grad(lambda W, h: _decode(W, h, capacity=64, bound=64)))(W, h0)
    np.testing.assert_allclose(got[0], want[0], rtol=1e-6)
    np.testing.assert_allclose(got[1], want[1], rtol=1e-5, atol=1e-6)


def test_a_while_loop_without_bound_learns_its_stacks():
    traces = []

    def loss(x, n):
        return jta.while_loop(lambda c: c[0] < n, lambda c: (c[0] + 1, c[1] * 1.001), (0, x))[1]

    g = jta.checked(jax.grad(_counted(loss, traces)))
    for n, new_traces in ((10, 1), (1000, 1), (300, 0), (1000, 0)):
        before = len(traces)
        np.testing.assert_allclose(g(1.0, n), np.float32(1.001) ** n, rtol=1e-4)
        assert len(traces) - before == new_traces, (n, len(traces) - before)


def test_donated_arguments_are_not_rerun():
    """A call that would need a larger plan cannot rerun with donated inputs: the record says so."""
    def loss(x, n):
        return jta.while_loop(lambda c: c[0] < n, lambda c: (c[0] + 1, c[1] * 1.001), (0, x))[1].sum()

    g = jta.checked(jax.grad(loss), donate_argnums=0)
    with pytest.raises(errors.UnimplementedError) as info:
        g(jnp.ones(3), 400)
    assert Error.LOOP_STACK_FULL.matches(info.value)


def test_tensorflow_style_backward_loop_over_a_grown_array():
    """TF's own machinery in these loops: a forward jta.while_loop grows an array; TensorArrayGradV3
    (``ta.grad``) locks its size where the loop left it, and a backward loop writes each step's
    gradient into the accumulator TF's way (``read_grad``), which then reads what jax.grad gives."""
    h0 = np.float32([1.0, 0.5])

    def forward(W, n):
        ta = jta.TensorArray(jnp.float32, size=0, dynamic_size=True, capacity=16, element_shape=(2,),
                             tensor_array_name="hs")

        def body(s):
            i, h, ta = s
            h = jnp.tanh(h @ W)
            return i + 1, h, ta.write(i, h)

        return jta.while_loop(lambda s: s[0] < n, body, (0, h0, ta), maximum_iterations=16)

    @jax.jit
    def tf_style(W, n):
        steps, _, ta = forward(W, n)
        ta, _, grads = ta.grad("gradients", {})  # TensorArrayGradV3: the forward size is locked here

        def back(s):  # d loss / d h_t = (t + 1) for loss = sum_t (t + 1) * sum(h_t), popped last to first
            t, grads = s
            return t - 1, gradients.read_grad(grads, ta, t, jnp.full(2, t + 1.0), source="gradients")

        _, grads = jta.while_loop(lambda s: s[0] >= 0, back, (steps - 1, grads), maximum_iterations=16)
        acc = grads[("hs", "gradients")]
        return acc.size(), acc.stack_padded()[0]

    def loss(hs):  # the same cotangent, through jax.grad of the stacked outputs
        return jnp.sum(jnp.arange(1.0, 17.0)[:, None] * hs)

    for n in (0, 5, 16):
        size, dhs = tf_style(W, n)
        hs = jax.jit(lambda W, n: forward(W, n)[2].stack_padded()[0])(W, n)
        assert int(size) == n
        want = jax.grad(loss)(hs) * (np.arange(16) < n)[:, None]
        np.testing.assert_allclose(dhs, want)


def test_raw_ops_arrays_and_given_capacities_are_planned_too():
    """``jta.raw_ops.TensorArrayV3`` is created as ``jta.TensorArray`` is, so a ``dynamic_size`` one
    grows under jta.checked too; an array given ``capacity=`` gets stack()'s size learned the same way."""
    def raw(n):
        state, h, flow = jta.raw_ops.TensorArrayV3(jta.raw_ops.new_state(), 0, jnp.float32, (), dynamic_size=True)
        state, flow = jax.lax.fori_loop(
            0, n, lambda i, c: jta.raw_ops.TensorArrayWriteV3(c[0], h, i, 3.0 * i, c[1]), (state, flow))
        state, size = jta.raw_ops.TensorArraySizeV3(state, h, flow)
        state, first = jta.raw_ops.TensorArrayGatherV3(state, h, [0, 2], flow, jnp.float32)
        return first, size

    first, size = jta.checked(raw)(300)
    np.testing.assert_array_equal(first, [0.0, 6.0])
    assert int(size) == 300

    def given(n):
        ta = jta.TensorArray(jnp.float32, size=0, dynamic_size=True, element_shape=(), capacity=16)
        return jax.lax.fori_loop(0, n, lambda i, ta: ta.write(i, 1.0 * i), ta).stack()

    np.testing.assert_array_equal(jta.checked(given)(9), np.arange(9, dtype=np.float32))


def test_stack_of_a_growing_array_inside_a_loop_body_is_refused_not_rerun_forever():
    """Its size differs from step to step, so no compiled size fits: the second relearning of one
    size in a call raises the record, which names stack_padded()."""
    def f(n):
        ta = jta.TensorArray(jnp.float32, size=0, dynamic_size=True, element_shape=())

        def body(i, c):
            ta, total = c
            ta = ta.write(i, 1.0 * i)
            return ta, total + ta.stack().sum()

        return jax.lax.fori_loop(0, n, body, (ta, 0.0))[1]

    with pytest.raises(errors.UnimplementedError, match=r"size differs between the stack\(\) calls.*stack_padded"):
        jta.checked(f)(6)


def test_grad_with_shape_accumulator_over_an_array_grown_without_capacity():
    """TensorArrayGradWithShape in these loops, with nothing sized by hand: under jta.checked a raw-op
    array grows in an unbounded jta.while_loop, the accumulator (two gradients at once: shape [2]
    prepended) locks its size where the loop left it, a backward jta.while_loop writes each step's
    two cotangents into it, and its stack has the forward size, with the rows TF's rule gives."""
    ops = jta.raw_ops

    def f(x, n):
        state, h, flow = ops.TensorArrayV3(ops.new_state(), 0, jnp.float32, (3,), dynamic_size=True)

        def forward(s):
            i, state, flow = s
            state, flow = ops.TensorArrayWriteV3(state, h, i, x * (i + 1.0), flow)
            return i + 1, state, flow

        steps, state, flow = jta.while_loop(lambda s: s[0] < n, forward, (0, state, flow))
        state, g, gflow = ops.TensorArrayGradWithShape(state, h, flow, [2], "gradients")

        def backward(s):
            t, state, gflow = s
            ct = jnp.stack([jnp.full(3, t + 1.0), jnp.full(3, -1.0)])
            state, gflow = ops.TensorArrayWriteV3(state, g, t, ct, gflow)
            return t - 1, state, gflow

        _, state, gflow = jta.while_loop(lambda s: s[0] >= 0, backward, (steps - 1, state, gflow))
        state, size = ops.TensorArraySizeV3(state, g, gflow)
        state, rows = ops.TensorArrayGatherV3(state, g, jnp.arange(4), gflow, jnp.float32)
        return size, rows

    x = np.float32([1.0, 2.0, 3.0])
    for n in (3, 4):
        size, rows = jta.checked(f)(x, n)
        assert int(size) == n
        t = np.arange(n, dtype=np.float32)
        want = np.stack([np.repeat(t[:, None] + 1, 3, 1), np.full((n, 3), -1.0, np.float32)], 1)
        np.testing.assert_array_equal(rows[:n], want)
        np.testing.assert_array_equal(rows[n:], 0.0)  # a gradient array reads past its size as zeros (TF)


@pytest.mark.parametrize("inner", ["jit", "jit-grad", "jit-jit"])
def test_a_jax_jit_inside_the_checked_function_traces_again_with_what_was_learned(inner):
    """A ``jax.jit`` inside the checked function caches its trace; the plan is part of JAX's trace
    context, so it traces again with each plan (before, ``jta.checked`` reran for ever)."""
    def f(x, idx):
        ta = jta.TensorArray(jnp.float32, size=0, dynamic_size=True, element_shape=())
        ta = jax.lax.fori_loop(0, idx.shape[0], lambda k, ta: ta.write(idx[k], x * k), ta)
        return ta.stack().sum()

    g = {"jit": jax.jit(f), "jit-grad": jax.jit(jax.grad(f)), "jit-jit": jax.jit(jax.jit(f))}[inner]
    args = (np.float32(2.0), jnp.asarray([0, 1, 2, 5], jnp.int32))
    with jax.disable_jit():
        expected = g(*args)
    np.testing.assert_allclose(jta.checked(g)(*args), expected)


def _growing(n, k=3, backwards=False):
    """``k`` dynamic_size arrays without capacity written at every step of a ``lax.while_loop`` of
    ``n`` steps (from ``n - 1`` down to 0 with ``backwards``)."""
    tas = [jta.TensorArray(jnp.float32, size=0, dynamic_size=True, element_shape=()) for _ in range(k)]

    def body(c):
        i, tas = c
        at = n - 1 - i if backwards else i
        return i + 1, [ta.write(at, at * (j + 1.0)) for j, ta in enumerate(tas)]

    _, tas = jax.lax.while_loop(lambda c: c[0] < n, body, (0, tas))
    return [ta.stack() for ta in tas]


@pytest.mark.parametrize("backwards", [False, pytest.param(True, marks=pytest.mark.long_only)])
def test_one_run_learns_all_an_array_needs(backwards):
    """A write past a planned buffer is an error to learn from: the loop runs on and the record
    keeps the largest index (not the first: one doubling per run), which is also stack()'s size.
    Three arrays of 1000 rows: a failed trace each (the buffer they need), then one run each."""
    traces = []
    f = jta.checked(jax.jit(_counted(lambda n: _growing(n, 3, backwards), traces)))
    for n, new_traces in ((1000, 7), (1000, 0), (3000, 3), (20, 3)):
        before = len(traces)
        for j, values in enumerate(f(n)):
            np.testing.assert_array_equal(values, (j + 1.0) * np.arange(n, dtype=np.float32))
        assert len(traces) - before == new_traces, (n, len(traces) - before)


def test_a_loop_kept_going_by_values_past_the_buffer_stops():
    """After an error to learn from, the loop runs on at most LEARNING_STEPS times the steps it had
    run: one whose exit reads what a dropped write would have written still ends, and the rerun is exact."""
    def f(n):
        ta = jta.TensorArray(jnp.float32, size=0, dynamic_size=True, element_shape=(), clear_after_read=False)
        ta = ta.write(0, 0.0)

        def body(c):
            i, ta = c
            return i + 1, ta.write(i + 1, ta.read(i) + 1.0)

        _, ta = jax.lax.while_loop(lambda c: c[1].read(c[0]) < n, body, (0, ta))  # past the buffer it reads 0s
        return ta.stack()

    np.testing.assert_array_equal(jta.checked(f)(600.0), np.arange(601, dtype=np.float32))


def test_a_real_error_after_a_learned_size_is_reported_after_the_rerun():
    """The first real error in program order, even when a write past the buffer came before it."""
    def f(n):
        ta = jta.TensorArray(jnp.float32, size=0, dynamic_size=True, element_shape=())
        ta = jax.lax.fori_loop(0, n, lambda i, ta: ta.write(i, 1.0 * i), ta)
        return ta.read(n + 5)

    with pytest.raises(errors.InvalidArgumentError, match="Tried to read from index 305 but array size is: 300"):
        jta.checked(f)(300)
