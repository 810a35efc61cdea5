"""Differentiating a scan as the loop an expert would write (``jta._delivery.scan_rewrite``).

A TensorArray written at a per-step index in a ``lax.scan`` (and not read there) is handed to
JAX's differentiation as the scan's stacked output, put in place after the loop; a TensorArray
read and not written, as a scanned input gathered before it. The kernel counts are in
``test_kernel_counts.py``; here, the values: every program is differentiated twice, with the
rewrite and with JAX's own rule for ``scan`` (the in-loop path), and the results must be equal
bit for bit, including indices that repeat, run out of range (clamped, ``checks=False``), come
from a counter or a scanned input, and reversed scans, under ``grad``, ``jvp`` and ``vmap``;
and the errors must be the same.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax

import jta
from jta._delivery import jax_rules, scan_rewrite

T, H = 6, 3
W = jnp.eye(H) * 0.5 + 0.1
XS = jnp.arange(T * H, dtype=jnp.float32).reshape(T, H) / 10
REPEATS = jnp.array([0, 2, 2, 7, -3, 1])  # a row twice, past the end, negative


def writes(W, xs, reverse=False, idx=None, checks=True):
    ta = jta.TensorArray(jnp.float32, size=T, element_shape=(H,), checks=checks)

    def step(c, tx):
        h, ta = c
        t, x = tx
        h = jnp.tanh(h @ W + x)
        return (h, ta.write(t, h)), None

    (_, ta), _ = lax.scan(step, (jnp.zeros(H), ta), (jnp.arange(T) if idx is None else idx, xs), reverse=reverse)
    return ta.stack()


def reads(W, xs, reverse=False, idx=None, checks=True):
    ta = jta.TensorArray(jnp.float32, size=T, element_shape=(H,), checks=checks).unstack(xs)

    def step(h, t):
        return jnp.tanh(h @ W + ta.read(t)), h

    return lax.scan(step, jnp.zeros(H), jnp.arange(T) if idx is None else idx, reverse=reverse)[1]


def chained(W, xs, checks=True, back=1, reverse=False):
    """W3: step ``t`` reads the row step ``t - back`` wrote (``back=1``: the previous step's, a
    carried row; otherwise the buffer stays in the loop)."""
    ta = jta.TensorArray(jnp.float32, size=T + 1, element_shape=(H,), checks=checks, clear_after_read=False)
    ta = ta.write(0, jnp.ones(H) * 0.3)
    step = lambda ta, tx: (ta.write(tx[0], jnp.tanh(ta.read(jnp.maximum(tx[0] - back, 0)) @ W + tx[1])), None)  # noqa: E731
    ts = jnp.arange(1, T + 1)
    return lax.scan(step, ta, (ts[::-1] if reverse else ts, xs), reverse=reverse)[0].stack()


def counted(W, xs, checks=True):
    ta = jta.TensorArray(jnp.float32, size=T, element_shape=(H,), checks=checks)

    def body(t, c):
        h, ta = c
        h = jnp.tanh(h @ W + xs[t])
        return h, ta.write(t, h)

    return lax.fori_loop(0, T, body, (jnp.zeros(H), ta))[1].stack()


def weighted(f):
    """A loss whose gradient tells the rows apart."""
    def loss(W, xs):
        out = f(W, xs)
        return jnp.sum(out ** 2 * jnp.arange(1.0, out.size + 1).reshape(out.shape))
    return loss


def _equal(a, b, what=""):
    for x, y in zip(jax.tree_util.tree_leaves(a), jax.tree_util.tree_leaves(b), strict=True):
        np.testing.assert_array_equal(np.asarray(x), np.asarray(y), err_msg=what)


PROGRAMS = {
    "writes": writes, "writes-reversed": functools.partial(writes, reverse=True),
    "writes-repeated-nochecks": functools.partial(writes, idx=REPEATS, checks=False),
    "writes-reversed-repeated-nochecks": functools.partial(writes, idx=REPEATS, checks=False, reverse=True),
    "writes-nochecks": functools.partial(writes, checks=False), "counter": counted,
    "chained": chained, "chained-nochecks": functools.partial(chained, checks=False),
    "chained-back2-nochecks": functools.partial(chained, checks=False, back=2),
    "chained-reversed-nochecks": functools.partial(chained, checks=False, reverse=True),
    "reads": reads, "reads-reversed": functools.partial(reads, reverse=True),
    "reads-repeated-nochecks": functools.partial(reads, idx=REPEATS, checks=False),
    "reads-reversed-repeated": functools.partial(reads, idx=REPEATS, reverse=True, checks=False),
}


@pytest.mark.parametrize("name", PROGRAMS)
def test_same_values_as_jaxs_rule(name):
    f = PROGRAMS[name]
    runs = {
        "grad": lambda: jax.jit(jax.value_and_grad(weighted(f), (0, 1)))(W, XS),
        "jvp": lambda: jax.jit(lambda W, xs: jax.jvp(f, (W, xs), (W, xs)))(W, XS),
        "vmap-grad": lambda: jax.jit(jax.vmap(jax.grad(weighted(f)), (None, 0)))(W, jnp.stack([XS, -XS])),
    }
    if name not in ("writes-repeated-nochecks", "reads-reversed-repeated", "chained-nochecks"):
        runs = {"grad": runs["grad"]}  # (jvp and vmap on two programs only: each run compiles twice)
    for how, run in runs.items():  # (each run makes new functions: nothing is cached between the two)
        new = run()
        with jax_rules.jax_scan_rules():
            old = run()
        _equal(new, old, how)


def test_the_rewrite_applies_where_it_should():
    """Writes and reads at per-step indices leave the loop; a buffer read where it is written
    (W3) stays."""
    def scan_of(f):
        jaxpr = jax.make_jaxpr(f)(W, XS)
        (eqn,) = [e for e in jaxpr.jaxpr.eqns if e.primitive is lax.scan_p]
        return scan_rewrite.analyse(eqn.params["jaxpr"], eqn.params["num_consts"], eqn.params["num_carry"])

    assert len(scan_of(writes).writes) == 1
    assert len(scan_of(reads).reads) == 1

    def read_after_write(W, xs):
        ta = jta.TensorArray(jnp.float32, size=T + 1, element_shape=(H,)).write(0, jnp.zeros(H))
        step = lambda ta, tx: (ta.write(tx[0], jnp.tanh(ta.read(tx[0] - 1) @ W + tx[1])), None)  # noqa: E731
        return lax.scan(step, ta, (jnp.arange(1, T + 1), xs))[0].stack()

    assert scan_of(read_after_write) is None  # (chained only when its indices are known while tracing)
    closed = jax.make_jaxpr(jax.grad(weighted(chained)))(W, XS)
    assert not any(e.primitive.name == "cond" for e in closed.jaxpr.eqns)  # (no opaque read left)


def test_errors_are_unchanged():
    """A row written twice with checks on: the same error under ``jta.checkify`` of the gradient,
    and ``jta.checked`` raises it."""
    f = jax.value_and_grad(weighted(functools.partial(writes, idx=REPEATS)), (0, 1))
    new = jax.jit(jta.checkify(f))(W, XS)
    with jax_rules.jax_scan_rules():
        old = jax.jit(jta.checkify(jax.value_and_grad(weighted(functools.partial(writes, idx=REPEATS)), (0, 1))))(W, XS)
    assert str(new[0]) == str(old[0]) and "already been written" in str(new[0])
    _equal(new[1], old[1])
    with pytest.raises(jta.errors.InvalidArgumentError, match="already been written"):
        jta.checked(jax.jit(f))(W, XS)
