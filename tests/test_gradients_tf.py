"""Gradients against real TensorFlow (the oracle).

TensorFlow computes TensorArray gradients three ways (spec §0, §5.4): mode K (a
``tf.compat.v1`` graph with control flow v1 and ``tf.gradients``: ``TensorArrayGradV3``
accumulators), E (``tf.GradientTape`` eagerly) and L (``tf.GradientTape`` inside
``tf.function``: TensorList gradients). For each program below the three TF results must equal
jta's three: ``jax.grad`` of the ``jta.TensorArray`` program, TF's backward through
``jta.gradients`` (registry) and through ``jta.raw_ops`` (accumulator state).

Control flow v1 is a process-wide switch in TF: :func:`k_graph` turns it off only while one
fresh graph is built and run, and restores it afterwards (``tests.helpers.k_graph``).
"""

from __future__ import annotations

import types

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax

import jta
from jta import gradients
from tests.helpers import BACKENDS, SOURCE, Rules, assert_close, f32, k_graph

tf = pytest.importorskip("tensorflow")
from tensorflow.python.ops import tensor_array_grad  # noqa: E402
from tensorflow.python.ops.parallel_for import gradients as pfor_gradients  # noqa: E402

rng = np.random.default_rng(2021)
RTOL, ATOL = 1e-5, 1e-5


def run_k(build, *args):
    """Build ``build(*tf constants) -> (fetches, check)`` in a K graph and run it."""
    with k_graph() as graph:
        consts = [tf.constant(a) for a in args]
        fetches = build(*consts)
        assert any(op.type == "TensorArrayGradV3" for op in graph.get_operations())
        assert not any(op.type.startswith("TensorList") for op in graph.get_operations())
        with tf.compat.v1.Session(graph=graph) as sess:
            return sess.run(fetches), graph


def test_k_graph_restores_control_flow_v2():
    before = tf.compat.v1.control_flow_v2_enabled()
    with k_graph():
        assert not tf.compat.v1.control_flow_v2_enabled()
        assert type(tf.TensorArray(tf.float32, 2)._implementation).__name__ == "_GraphTensorArray"
    assert tf.compat.v1.control_flow_v2_enabled() == before


# -- case 31: stack + read + concat, their gradients accumulate ---------------------------------

_V0, _V1 = rng.standard_normal(2).astype(np.float32), rng.standard_normal(2).astype(np.float32)
_DP, _DR, _DS = (rng.standard_normal(s).astype(np.float32) for s in ((2, 2), (2,), (4,)))


def _tf_case31(v0, v1):
    ta = tf.TensorArray(tf.float32, size=2, clear_after_read=False)
    ta = ta.write(0, v0).write(1, v1)
    return ta.stack(), ta.read(0), ta.concat()


def _tf_tape_case31(v0, v1):
    with tf.GradientTape() as tape:
        tape.watch([v0, v1])
        outs = _tf_case31(v0, v1)
    return tape.gradient(outs, [v0, v1], output_gradients=[_DP, _DR, _DS])


def _jta_case31(b, v0, v1):
    h = b.new(2, clear_after_read=False)
    b.write(h, 0, v0)
    b.write(h, 1, v1)
    p, r = b.stack(h), b.read(h, 0)
    s, lengths = b.concat(h)
    return (p, r, s), (h, lengths)


def _jta_case31_backward(b, ctx, dp, dr, ds):
    h, lengths = ctx
    b.gather_grad(h, np.arange(2), dp)
    b.read_grad(h, 0, dr)
    b.concat_grad(h, lengths, ds)
    d1 = b.write_grad(h, 1)
    return b.write_grad(h, 0), d1


@pytest.fixture(scope="module")
def case31_jta():
    out = {}
    for api in BACKENDS:
        b = BACKENDS[api]()
        _, ctx = _jta_case31(b, _V0, _V1)
        out[api] = _jta_case31_backward(b, ctx, _DP, _DR, _DS)
    _, vjp = jax.vjp(lambda a, c: _jta_case31(Rules(), a, c)[0], _V0, _V1)
    out["jax.vjp"] = vjp((_DP, _DR, _DS))
    return out


def test_case31_against_tf_k_graph(case31_jta):
    def build(v0, v1):
        return tf.gradients(list(_tf_case31(v0, v1)), [v0, v1], grad_ys=[_DP, _DR, _DS])

    want, graph = run_k(build, _V0, _V1)
    sources = {op.get_attr("source").decode() for op in graph.get_operations() if op.type == "TensorArrayGradV3"}
    assert sources == {"gradients"}
    for route, got in case31_jta.items():
        assert_close(got, tuple(want), RTOL, ATOL, route)


@pytest.mark.parametrize("tf_mode", ["eager", "tf.function"])
def test_case31_against_tf_gradient_tape(case31_jta, tf_mode):
    fn = _tf_tape_case31 if tf_mode == "eager" else tf.function(_tf_tape_case31)
    want = [g.numpy() for g in fn(tf.constant(_V0), tf.constant(_V1))]
    for route, got in case31_jta.items():
        assert_close(got, tuple(want), RTOL, ATOL, route)


def test_case31_spec_numbers_in_tf_and_jta():
    v0, v1 = np.float32([-1, 1]), np.float32([-10, 10])
    dys = [np.float32([[2, 3], [4, 5]]), np.float32([-0.5, 1.5]), np.float32([20, 30, 40, 50])]
    want, _ = run_k(lambda a, c: tf.gradients(list(_tf_case31(a, c)), [a, c], grad_ys=dys), v0, v1)
    assert_close(tuple(want), ([21.5, 34.5], [44.0, 55.0]))
    b = BACKENDS["raw"]()
    _, ctx = _jta_case31(b, v0, v1)
    assert_close(_jta_case31_backward(b, ctx, *dys), tuple(want))


# -- a while-loop RNN (like case 37, with a tanh) -----------------------------------------------

T, H = 4, 3
_W = (rng.standard_normal((H, H)) * 0.5).astype(np.float32)
_XS, _H0, _DY = (rng.standard_normal(s).astype(np.float32) for s in ((T, H), (H,), (T, H)))


def _tf_rnn_k(W, xs, h0):
    ta = tf.TensorArray(tf.float32, size=T)

    def body(t, h, ta):
        h = tf.tanh(tf.linalg.matvec(W, h) + xs[t])
        return t + 1, h, ta.write(t, h)

    _, _, ta = tf.compat.v1.while_loop(lambda t, *_: t < T, body, [tf.constant(0), h0, ta])
    return tf.gradients(ta.stack(), [W, xs, h0], grad_ys=_DY)


def _tf_rnn_tape(W, xs, h0):
    with tf.GradientTape() as tape:
        tape.watch([W, xs, h0])
        ta = tf.TensorArray(tf.float32, size=T)
        h = h0
        for t in tf.range(T):  # a while_loop (v2) inside tf.function, a Python loop eagerly
            h = tf.tanh(tf.linalg.matvec(W, h) + xs[t])
            ta = ta.write(t, h)
        y = ta.stack()
    return tape.gradient(y, [W, xs, h0], output_gradients=_DY)


def _jta_rnn(b, W, xs, h0):
    h = b.new(T, element_shape=(H,), clear_after_read=False)

    def step(carry, t):
        b.carry, prev = carry
        new = jnp.tanh(W @ prev + xs[t])
        b.write(h, t, new)
        return (b.carry, new), None

    (b.carry, _), _ = lax.scan(step, (b.carry, h0), jnp.arange(T))
    return b.stack(h), h


def _jta_rnn_backward(b, h, y, W, h0, dy):
    """TF's backward: Stack -> scatter into the accumulator; the gradient while-loop reads it
    back per step (Write's gradient) with the accumulator state in the loop carry."""
    b.gather_grad(h, np.arange(T), dy)

    def back(carry, t):
        b.carry, dh, dW = carry
        d_out = b.write_grad(h, t)
        prev = jnp.where(t > 0, y[jnp.maximum(t - 1, 0)], h0)
        dpre = (d_out + dh) * (1 - y[t] ** 2)
        return (b.carry, W.T @ dpre, dW + jnp.outer(dpre, prev)), dpre

    zeros = jnp.zeros(H), jnp.zeros((H, H))
    (b.carry, dh0, dW), dxs = lax.scan(back, (b.carry, *zeros), jnp.arange(T), reverse=True)
    return dW, dxs, dh0


@jax.jit
def _jta_rnn_all(W, xs, h0, dy):
    out = {}
    for api in BACKENDS:
        b = BACKENDS[api]()
        y, h = _jta_rnn(b, W, xs, h0)
        out[api] = _jta_rnn_backward(b, h, y, W, h0, dy)
        jta.throw(b.carry)
    loss = lambda *a: jnp.sum(_jta_rnn(Rules(), *a)[0] * dy)  # noqa: E731
    out["jax.grad"] = jax.grad(loss, (0, 1, 2))(W, xs, h0)
    return out


@pytest.fixture(scope="module")
def rnn_jta():
    return _jta_rnn_all(_W, _XS, _H0, _DY)


def test_rnn_against_tf_k_while_loop(rnn_jta):
    want, graph = run_k(_tf_rnn_k, _W, _XS, _H0)
    assert any(op.type == "Enter" for op in graph.get_operations())  # a v1 while loop
    for route, got in rnn_jta.items():
        assert_close(got, tuple(want), RTOL, ATOL, route)


@pytest.mark.parametrize("tf_mode", ["eager", "tf.function"])
def test_rnn_against_tf_gradient_tape(rnn_jta, tf_mode):
    fn = _tf_rnn_tape if tf_mode == "eager" else tf.function(_tf_rnn_tape)
    want = [g.numpy() for g in fn(tf.constant(_W), tf.constant(_XS), tf.constant(_H0))]
    for route, got in rnn_jta.items():
        assert_close(got, tuple(want), RTOL, ATOL, route)


@pytest.mark.parametrize("dynamic", [False, True], ids=["static", "dynamic"])
def test_case37_against_tf_k_while_loop(dynamic):
    """Case 37 exactly (out_t = v0[t] + var + state_t), K with a static and a dynamic array."""
    v0, var, s0 = (rng.standard_normal(s).astype(np.float32) for s in ((3, 5), (5,), (5,)))
    dy = -np.arange(15, dtype=np.float32).reshape(3, 5)

    def build(v0, var, s0):
        ta = tf.TensorArray(tf.float32, size=0 if dynamic else 3, dynamic_size=dynamic)

        def body(t, st, ta):
            return t + 1, st + v0[t], ta.write(t, v0[t] + var + st)

        _, _, ta = tf.compat.v1.while_loop(lambda t, *_: t < 3, body, [tf.constant(0), s0, ta])
        p = ta.stack()
        return p, tf.gradients(p, [v0, var, s0], grad_ys=dy)

    (p, want), _ = run_k(build, v0, var, s0)
    cs = np.cumsum(dy[::-1], 0)[::-1]
    assert_close(tuple(want), (cs, dy.sum(0), dy.sum(0)))

    def loss(v0, var, s0):
        ta = jta.TensorArray(f32, 0 if dynamic else 3, dynamic_size=dynamic, element_shape=(5,),
                             capacity=3 if dynamic else None)

        def step(c, t):
            ta, st = c
            return (ta.write(t, v0[t] + var + st), st + v0[t]), None

        (ta, _), _ = lax.scan(step, (ta, s0), jnp.arange(3))
        out = ta.gather(jnp.arange(3))
        return jnp.sum(out * dy), out

    grads, out = jax.jit(jax.grad(loss, (0, 1, 2), has_aux=True))(v0, var, s0)
    assert_close(out, p)
    assert_close(grads, tuple(want), RTOL, ATOL)


# -- case 40: two tf.gradients calls, two sources -------------------------------------------------

def test_case40_two_gradient_calls_have_two_sources():
    a, bb, g0 = (rng.standard_normal((3, 5)).astype(np.float32) for _ in range(3))

    def build(a, bb):
        ta = tf.TensorArray(tf.float32, size=2).write(0, a).write(1, bb)
        c = ta.read(0) + ta.read(1)
        return tf.gradients([c], [a], grad_ys=[g0])[0], tf.gradients([c], [bb], grad_ys=[g0])[0]

    want, graph = run_k(build, a, bb)
    sources = sorted({op.get_attr("source").decode() for op in graph.get_operations()
                      if op.type == "TensorArrayGradV3"})
    assert sources == ["gradients", "gradients_1"]
    assert_close(tuple(want), (g0, g0))
    for op in graph.get_operations():  # jta's _GetGradSource agrees on every accumulator op
        if op.type == "TensorArrayGradV3":
            assert gradients.grad_source(op.name) == op.get_attr("source").decode()
    reg = {}
    ta = jta.TensorArray(f32, 2, tensor_array_name="foo").write(0, a).write(1, bb)
    for source in sources:
        reg = gradients.read_grad(reg, ta, 0, g0, source)
        reg = gradients.read_grad(reg, ta, 1, g0, source)
    reg, _ = gradients.write_grad(reg, ta, 1, "gradients")
    reg, da = gradients.write_grad(reg, ta, 0, "gradients")
    reg, db = gradients.write_grad(reg, ta, 1, "gradients_1")
    assert_close((da, db), tuple(want))


# -- case 41: _GetGradSource ---------------------------------------------------------------------

@pytest.mark.parametrize("name", [
    "gradients:0", "gradients_0:0", "gradients/foo:0", "gradients/foo/bar", "gradients_0/foo",
    "foo/gradients:0", "foo/gradients/bar", "foo/bar/gradients_0/baz", "foo/gradients/bar/gradients_0/baz",
    "gradients_1/while/TensorArrayWrite/TensorArrayWriteV3_grad/TensorArrayGrad/TensorArrayGradV3",
    "", "foo", "foo/bar", "Const:0", "foo/grad/bar",
])
def test_case41_grad_source_matches_tf(name):
    obj = types.SimpleNamespace(name=name)
    try:
        want = tensor_array_grad._GetGradSource(obj)
    except ValueError as e:
        with pytest.raises(ValueError) as got:
            gradients.grad_source(name)
        assert str(got.value) == str(e)
    else:
        assert gradients.grad_source(name) == want


# -- case 76: pfor Jacobian with TensorArrayGradWithShape ----------------------------------------

def test_case76_against_tf_pfor_jacobian():
    x = np.arange(1.0, 7.0, dtype=np.float32).reshape(3, 2)

    def build(x):
        ta = tf.TensorArray(tf.float32, size=3).unstack(x)
        y = tf.reshape(tf.stack([ta.read(i) * (i + 1) for i in range(3)]), [-1]) ** 2
        jac = pfor_gradients.jacobian(y, x, use_pfor=True)
        with_shape = [op for op in tf.compat.v1.get_default_graph().get_operations()
                      if op.type == "TensorArrayGradWithShape"]
        return jac, [op.inputs[2] for op in with_shape]

    (jac, prepends), graph = run_k(build, x)
    assert len(prepends) == 4 and all(list(p) == [6] for p in prepends)
    assert {op.get_attr("source") for op in graph.get_operations()
            if op.type == "TensorArrayGradWithShape"} == {b"loop_body/gradients"}

    # jta: one GradWithShape([6]) accumulator written with [6, 2] values (pfor's route), and jacrev.
    for api in BACKENDS:
        b = BACKENDS[api]()
        h = b.new(3)
        b.unstack(h, x)
        s = jnp.stack([b.read(h, i) * (i + 1) for i in range(3)])
        ds = (2 * s.reshape(-1) * np.eye(6, dtype=np.float32)).reshape(6, 3, 2)
        for i in range(3):
            b.read_grad(h, i, ds[:, i] * (i + 1), "loop_body/gradients", shape_to_prepend=[6])
        dx = b.scatter_grad(h, np.arange(3), "loop_body/gradients", shape_to_prepend=[6])
        assert_close(jnp.moveaxis(dx, 1, 0), jac, RTOL, ATOL)

    def f(v):
        ta = jta.TensorArray(f32, 3).unstack(v)
        return jnp.stack([ta.read(i) * (i + 1) for i in range(3)]).reshape(-1) ** 2

    assert_close(jax.jacrev(f)(x), jac, RTOL, ATOL)
    assert_close(jax.vmap(jax.vjp(f, x)[1])(jnp.eye(6))[0], jac, RTOL, ATOL)


def test_case47_48_unread_slots_get_zeros_in_tf_and_jta():
    """Cases 47/48 in K: an unstacked/written slot that is never read gets an explicit zero."""
    def build(x, x0, x1):
        r = tf.TensorArray(tf.float32, size=2).unstack(x).read(0)
        ta = tf.TensorArray(tf.float32, size=2).write(0, x0).write(1, x1)
        return tf.gradients([r], [x])[0], tf.gradients([ta.read(0)], [x0, x1])

    (dx, (d0, d1)), _ = run_k(build, np.float32([2, 3]), np.float32(5), np.float32(10))
    assert_close((dx, d0, d1), ([1.0, 0.0], 1.0, 0.0))
    ta = jta.TensorArray(f32, 2, tensor_array_name="t").unstack(np.float32([2, 3]))
    reg, got = gradients.unstack_grad(gradients.read_grad({}, ta, 0, np.float32(1), SOURCE), ta, SOURCE)
    assert_close(got, dx)
