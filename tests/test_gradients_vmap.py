"""Many gradients at once, three ways that must agree (spec §3.2, §3.5, case 76).

For ``k`` cotangents of one forward program:

1. ``jax.vmap`` of TF's backward pass (the rules, through ``jta.gradients`` and through
   ``jta.raw_ops``) over the ``k`` cotangents;
2. the pfor route: one ``TensorArrayGradWithShape(shape_to_prepend=[k])`` accumulator whose
   elements are ``[k, *element]`` (TF's layout: the prepended dims sit inside each element),
   written with the stacked partial gradients — through ``jta.gradients(...,
   shape_to_prepend=[k])`` and through the raw ops;
3. JAX's own autodiff of the forward program: ``jax.vmap(vjp)`` and ``jax.jacrev``.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax

from tests.helpers import BACKENDS, Raw, Rules, assert_close, budget

rng = np.random.default_rng(76)
T, H = 4, 3
_W = (rng.standard_normal((H, H)) * 0.5).astype(np.float32)
_H0 = rng.standard_normal(H).astype(np.float32)


def _lead(x, prepend):
    """Partial gradients with the batch axis first -> TF's per-element layout (batch second)."""
    return x if prepend is None else jnp.moveaxis(x, 0, 1)


def _out(dx, prepend):
    """An unstack/scatter/gather gradient ``[n, (k,) ...]`` -> ``[(k,) n, ...]``."""
    return dx if prepend is None else jnp.moveaxis(dx, 1, 0)


# Case 76: y = reshape(stack_i(read(i) * (i + 1)), [-1]) ** 2, x 3x2 unstacked into an array.
def case76_forward(b, x):
    h = b.new(3)
    b.unstack(h, x)
    s = jnp.stack([b.read(h, i) * (i + 1) for i in range(3)])
    return s.reshape(-1) ** 2, (h, s)


def case76_backward(b, ctx, dy, prepend=None, source="gradients"):
    h, s = ctx
    ds = (2 * s.reshape(-1) * dy).reshape(dy.shape[:-1] + (3, 2))
    for i in range(3):
        b.read_grad(h, i, ds[..., i, :] * (i + 1), source, prepend)
    return _out(b.scatter_grad(h, np.arange(3), source, prepend), prepend)


def case76_jacobian(x):
    """The analytic Jacobian ``[6, 3, 2]``: d y[2i+c] / d x[i,c] = 2 (i+1)^2 x[i,c]."""
    jac = np.zeros((6, 3, 2), np.float32)
    for i in range(3):
        for c in range(2):
            jac[2 * i + c, i, c] = 2 * (i + 1) ** 2 * x[i, c]
    return jac


# Scatter, gather with a repeated index, two reads multiplied: y = [sin(gather), r0 * r3].
def mix_forward(b, x):
    h = b.new(4, element_shape=(2,), clear_after_read=False)
    b.scatter(h, np.array([3, 0, 1]), x)
    g = b.gather(h, np.array([0, 3, 3]))
    r0, r3 = b.read(h, 0), b.read(h, 3)
    return jnp.concatenate([jnp.sin(g).reshape(-1), r0 * r3]), (h, g, r0, r3)


def mix_backward(b, ctx, dy, prepend=None):
    h, g, r0, r3 = ctx
    dg = jnp.cos(g) * dy[..., :6].reshape(dy.shape[:-1] + (3, 2))
    b.gather_grad(h, np.array([0, 3, 3]), _lead(dg, prepend), shape_to_prepend=prepend)
    b.read_grad(h, 0, dy[..., 6:] * r3, shape_to_prepend=prepend)
    b.read_grad(h, 3, dy[..., 6:] * r0, shape_to_prepend=prepend)
    return _out(b.scatter_grad(h, np.array([3, 0, 1]), shape_to_prepend=prepend), prepend)


# Writes of computed values, stacked and squared.
def writes_forward(b, x):
    h = b.new(3, element_shape=(2,))
    b.write(h, 0, x[0] * x[1])
    b.write(h, 1, jnp.sin(x[2]))
    b.write(h, 2, x[0])
    s = b.stack(h)
    return s.reshape(-1) ** 2, (h, s, x)


def writes_backward(b, ctx, dy, prepend=None):
    h, s, x = ctx
    ds = (2 * s.reshape(-1) * dy).reshape(dy.shape[:-1] + (3, 2))
    b.gather_grad(h, np.arange(3), _lead(ds, prepend), shape_to_prepend=prepend)
    d2 = b.write_grad(h, 2, shape_to_prepend=prepend)
    d1 = b.write_grad(h, 1, shape_to_prepend=prepend)
    d0 = b.write_grad(h, 0, shape_to_prepend=prepend)
    return jnp.stack([d0 * x[1] + d2, d0 * x[0], d1 * jnp.cos(x[2])], -2)


# An RNN in lax.scan; its backward is a reverse scan carrying the registry / raw state.
def rnn_forward(b, xs):
    xs = jnp.asarray(xs)
    h = b.new(T, element_shape=(H,), clear_after_read=False)

    def step(carry, t):
        b.carry, prev = carry
        new = jnp.tanh(_W @ prev + xs[t])
        b.write(h, t, new)
        return (b.carry, new), None

    (b.carry, _), _ = lax.scan(step, (b.carry, jnp.asarray(_H0)), jnp.arange(T))
    y = b.stack(h)
    return y.reshape(-1), (h, y)


def rnn_backward(b, ctx, dy, prepend=None):
    h, y = ctx
    lead = dy.shape[:-1]
    b.gather_grad(h, np.arange(T), _lead(dy.reshape(lead + (T, H)), prepend), shape_to_prepend=prepend)

    def back(carry, t):
        b.carry, dh = carry
        d_out = b.write_grad(h, t, shape_to_prepend=prepend)
        dpre = (d_out + dh) * (1 - y[t] ** 2)
        return (b.carry, dpre @ _W), dpre

    (b.carry, _), dxs = lax.scan(back, (b.carry, jnp.zeros(lead + (H,))), jnp.arange(T), reverse=True)
    return _lead(dxs, prepend)


PROGRAMS = {
    "case76": (case76_forward, case76_backward, (3, 2)),
    "mix": (mix_forward, mix_backward, (3, 2)),
    "writes": (writes_forward, writes_backward, (3, 2)),
    "rnn": (rnn_forward, rnn_backward, (T, H)),
}


def three_ways(name, x, dys):
    """``{route: [k, *x.shape] gradients}`` for the ``k`` cotangents ``dys``."""
    forward, backward, _ = PROGRAMS[name]
    k = dys.shape[0]
    out = {}
    for api in BACKENDS:
        def one(dy, api=api):  # TF's backward for one cotangent
            b = BACKENDS[api]()
            _, ctx = forward(b, x)
            return backward(b, ctx, dy)

        out[f"vmap-rules-{api}"] = jax.vmap(one)(dys)
        b = BACKENDS[api]()  # one accumulator per array, elements [k, *element]
        _, ctx = forward(b, x)
        out[f"with-shape-{api}"] = backward(b, ctx, dys, prepend=[k])
        grads = b.registry if api == "ta" else b.state.grads
        assert all(g.element_shape[0] == k for g in grads.values())
    f = lambda v: forward(Rules(), v)[0]  # noqa: E731
    _, vjp = jax.vjp(f, x)
    out["vmap-vjp"] = jax.vmap(lambda dy: vjp(dy)[0])(dys)
    out["jacrev"] = jnp.einsum("kj,j...->k...", dys, jax.jacrev(f)(x))
    return out


_JITTED = jax.jit(three_ways, static_argnums=0)


@pytest.mark.parametrize(("name", "k", "mode"), [
    *[(name, k, "jit") for name in PROGRAMS for k in ((1, 3, 16) if budget.LONG else (16,))],  # 16 cotangents; 1 and 3 too under --long
    ("case76", 3, "eager"), ("rnn", 3, "eager")])
def test_three_ways_agree(name, k, mode):
    shape = PROGRAMS[name][2]
    x = rng.standard_normal(shape).astype(np.float32)
    n_out = int(np.prod(PROGRAMS[name][0](Rules(), x)[0].shape))
    dys = rng.standard_normal((k, n_out)).astype(np.float32)
    out = (_JITTED if mode == "jit" else three_ways)(name, jnp.asarray(x), jnp.asarray(dys))
    want = out["jacrev"]
    assert want.shape == (k, *shape)
    for route, got in out.items():
        assert_close(got, want, rtol=1e-5, atol=1e-5, label=route)


@pytest.mark.parametrize("mode", ["eager", "jit"])
def test_case76_pfor_jacobian(mode):
    """Case 76: the [6, 3, 2] Jacobian equals the analytic one, by jacrev, by vmap of the rules,
    and by one TensorArrayGradWithShape accumulator with shape_to_prepend=[6] per array (TF's
    pfor builds exactly that, with source 'loop_body/gradients')."""
    x = np.arange(1.0, 7.0, dtype=np.float32).reshape(3, 2)
    eye = np.eye(6, dtype=np.float32)

    def routes(x, eye):
        out = {"jacrev": jax.jacrev(lambda v: case76_forward(Rules(), v)[0])(x),
               "jacfwd": jax.jacfwd(lambda v: case76_forward(Rules(), v)[0])(x)}
        for api in BACKENDS:
            b = BACKENDS[api]()
            _, ctx = case76_forward(b, x)
            out[f"with-shape-{api}"] = case76_backward(b, ctx, eye, prepend=[6], source="loop_body/gradients")
            grads = b.registry if api == "ta" else b.state.grads
            assert [(s, g.element_shape) for (_, s), g in grads.items()] == [("loop_body/gradients", (6, 2))]

            def one(dy, api=api):
                b = BACKENDS[api]()
                _, ctx = case76_forward(b, x)
                return case76_backward(b, ctx, dy)
            out[f"vmap-rules-{api}"] = jax.vmap(one)(eye)
        return out

    out = (jax.jit(routes) if mode == "jit" else routes)(x, eye)
    for route, jac in out.items():
        assert_close(jac, case76_jacobian(x), label=route)


def test_with_shape_accumulator_layout_is_per_element():
    """TF's layout: prepended dims inside each element, ``[size, k, *element]``; reading one
    slot gives the k partial gradients of that element (spec §6)."""
    k = 5
    b = Raw()
    h = b.new(3, element_shape=(2,))
    b.unstack(h, np.ones((3, 2), np.float32))
    g = b.grad(h, "s", shape_to_prepend=[k])
    assert b.state[g].element_shape == (k, 2)
    rows = np.arange(k * 2, dtype=np.float32).reshape(k, 2)
    b.write(g, 1, rows)
    b.write(g, 1, rows)
    assert_close(b.read(g, 1), 2 * rows)
    assert_close(b.read(g, 0), np.zeros((k, 2)))
    assert_close(b.gather(g, np.array([2])), np.zeros((1, k, 2)))
