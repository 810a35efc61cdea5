"""Eager code whose loops and conditionals JAX compiles as it dispatches them (outside
``jax.disable_jit()``; and ``vmap`` of a ``while_loop`` even inside it) raises jta's exception,
the one ``disable_jit`` raises op by op: not JAX's ``JaxRuntimeError``, and no error lost with an
array made and dropped inside the loop."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import pytest
from jax import lax

import jta
from jta import raw_ops as ops

f32 = jnp.float32


def source():
    return jta.TensorArray(f32, size=3, element_shape=()).unstack(jnp.arange(3.0))


def scan_reads(n):
    src = source()
    return lax.scan(lambda c, t: (c + src.read(t), None), 0.0, jnp.arange(n))[0]


def fori_writes_twice(n):
    ta = jta.TensorArray(f32, size=3, element_shape=())
    return lax.fori_loop(0, n, lambda i, ta: ta.write(i // 2, 1.0), ta).stack()


def while_reads(n):
    src = source()
    return lax.while_loop(lambda c: c[0] < n, lambda c: (c[0] + 1, c[1] + src.read(c[0])), (0, f32(0)))[1]


def cond_reads(i):
    src = source()
    return lax.cond(i >= 0, lambda: src.read(i), lambda: f32(0))


def dropped_in_loop(j):
    """An array made, written twice and dropped in each step: only the error tells."""
    def step(c, t):
        jta.TensorArray(f32, size=2, element_shape=()).write(0, 1.0).write(jnp.where(t == j, 0, 1), 2.0)
        return c + t, None

    return lax.scan(step, 0, jnp.arange(3))[0]


def raw_double_read(i):
    state, handle, flow = ops.TensorArrayV3(ops.new_state(), 3, f32, element_shape=())
    state, flow = ops.TensorArrayScatterV3(state, handle, jnp.arange(3), jnp.arange(3.0), flow)

    def step(state, t):
        state, x = ops.TensorArrayReadV3(state, handle, jnp.where(t == i, 0, t), flow, f32)
        return state, x

    state, xs = lax.scan(step, state, jnp.arange(3))
    return jta.throw(state), xs


def vmapped_while(n):
    src = source()
    return jax.vmap(lambda m: lax.while_loop(lambda c: c[0] < m, lambda c: (c[0] + 1, c[1] + src.read(c[0])),
                                             (0, f32(0)))[1])(jnp.stack([jnp.int32(1), n]))


CASES = [(scan_reads, 5), (scan_reads, 3), (fori_writes_twice, 3), (fori_writes_twice, 1), (while_reads, 4),
         (cond_reads, 7), (cond_reads, 2), (dropped_in_loop, 1), (dropped_in_loop, 9), (raw_double_read, 2),
         (vmapped_while, 5), (vmapped_while, 2)]


def outcome(thunk):
    try:
        return "ok", jax.tree_util.tree_map(lambda x: jnp.asarray(x).tolist(), thunk())
    except Exception as e:  # noqa: BLE001 - compared with the op-by-op outcome
        return type(e).__name__, str(e)


@pytest.mark.parametrize("case", CASES, ids=lambda c: f"{c[0].__name__}-{c[1]}")
def test_eager_calls_raise_what_op_by_op_raises(case):
    f, arg = case
    with jax.disable_jit():
        want = outcome(lambda: f(jnp.int32(arg)))
    got = outcome(lambda: f(jnp.int32(arg)))
    assert got == want
    assert got[0] in ("ok", "InvalidArgumentError"), got


def test_vmap_of_a_while_loop_under_disable_jit():
    """``vmap`` of a ``while_loop`` is compiled even under ``disable_jit``."""
    with jax.disable_jit(), pytest.raises(jta.errors.InvalidArgumentError, match="index 3 but array size is: 3"):
        vmapped_while(jnp.int32(5))


def test_other_loops_keep_jax_s_implementation():
    """A loop without TensorArray checks runs as JAX runs it."""
    assert lax.scan(lambda c, x: (c + x, c), 0, jnp.arange(4))[0] == 6
    assert lax.while_loop(lambda c: c < 5, lambda c: c + 2, 0) == 6
