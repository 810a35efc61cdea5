"""JAX autodiff through every TensorArray op, against TF's hand-written backward and plain jnp.

For each op (write, read, stack, unstack, gather, scatter, concat, split) a small program is
built three ways: with ``jta.TensorArray``, with plain ``jax.numpy``, and as the TF-style
backward pass of ``jta.gradients`` on an explicit registry. ``jax.vjp``/``jax.grad``/``jax.jvp``
of the jta program must equal the plain-jnp ones and the TF-style rules — eagerly, under
``jax.jit`` (indices traced) and, for the ops taking indices, in a ``lax.scan`` body. Then the
same inside ``lax.scan``/``lax.fori_loop`` loops, in every mode including ``jax.disable_jit()``
(the registry carried through the backward loop), and the registry and raw state passed
across a ``jax.jit`` boundary.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax

import jta
from jta import gradients
from jta import raw_ops as ops
from jta.errors import InvalidArgumentError
from tests.helpers import MODES, SOURCE, assert_close, f32, k_text, run
from tests.helpers.errors import run_reporting

pytestmark = pytest.mark.rotate("mode")  # each case in one mode by default, all under --long

mode_param = pytest.mark.parametrize("mode", MODES)
rng = np.random.default_rng(7)


def _r(*shape):
    return rng.standard_normal(shape).astype(np.float32)


def TA(size, element_shape=(2,), **kw):
    return jta.TensorArray(f32, size, element_shape=element_shape, tensor_array_name="ta", **kw)


@dataclasses.dataclass
class OpCase:
    """``jta(x, idx)`` and ``ref(x, idx)`` compute the same output; ``rules(x, idx, ct)``
    is TF's backward of the jta program (``tensor_array_grad.py``) through a registry."""

    jta: Callable[..., Any]
    ref: Callable[..., Any]
    rules: Callable[..., Any]
    x: np.ndarray
    idx: np.ndarray


# write: two writes at traced indices, then stack
def _write_fwd(x, idx):
    return TA(4).write(idx[0], x[0]).write(idx[1], x[1])


def _write_rules(x, idx, ct):
    ta0 = TA(4)
    ta1 = ta0.write(idx[0], x[0])
    reg = gradients.stack_grad({}, ta1.write(idx[1], x[1]), ct, SOURCE)
    reg, d1 = gradients.write_grad(reg, ta1, idx[1], SOURCE)
    reg, d0 = gradients.write_grad(reg, ta0, idx[0], SOURCE)
    return jnp.stack([d0, d1]), reg


# read: repeated reads at traced indices (their gradients aggregate)
def _read_fwd(x, idx):
    ta = TA(3).unstack(x)
    return jnp.stack([ta.read(idx[k]) for k in range(3)])


def _read_rules(x, idx, ct):
    ta = TA(3).unstack(x)
    reg = {}
    for k in range(3):
        reg = gradients.read_grad(reg, ta, idx[k], ct[k], SOURCE)
    reg, dx = gradients.unstack_grad(reg, ta, SOURCE)
    return dx, reg


# stack: three writes at static indices, stacked
def _stack_fwd(x, idx):
    del idx
    return TA(3).write(0, x[0]).write(1, x[1]).write(2, x[2]).stack()


def _stack_rules(x, idx, ct):
    tas = [TA(3)]
    for i in range(3):
        tas.append(tas[-1].write(i, x[i]))
    reg = gradients.stack_grad({}, tas[-1], ct, SOURCE)
    ds = []
    for i in reversed(range(3)):
        reg, d = gradients.write_grad(reg, tas[i], i, SOURCE)
        ds.append(d)
    return jnp.stack(ds[::-1]), reg


# unstack: unstack, then reads in reverse order
def _unstack_fwd(x, idx):
    ta = TA(3).unstack(x)
    return jnp.stack([ta.read(2 - i) for i in range(3)])


def _unstack_rules(x, idx, ct):
    ta = TA(3).unstack(x)
    reg = {}
    for i in range(3):
        reg = gradients.read_grad(reg, ta, 2 - i, ct[i], SOURCE)
    reg, dx = gradients.unstack_grad(reg, ta, SOURCE)
    return dx, reg


# gather at traced (repeated) indices
def _gather_rules(x, idx, ct):
    ta = TA(3).unstack(x)
    reg = gradients.gather_grad({}, ta, idx, ct, SOURCE)
    reg, dx = gradients.unstack_grad(reg, ta, SOURCE)
    return dx, reg


# scatter at traced indices into a larger array, stacked
def _scatter_rules(x, idx, ct):
    ta = TA(4).scatter(idx, x)
    reg = gradients.stack_grad({}, ta, ct, SOURCE)
    reg, dx = gradients.scatter_grad(reg, ta, idx, SOURCE)
    return dx, reg


# concat of equal blocks
def _concat_rules(x, idx, ct):
    ta = TA(3, element_shape=(2, 2)).unstack(x)
    reg = gradients.concat_grad({}, ta, np.full(3, 2), ct, SOURCE)
    reg, dx = gradients.unstack_grad(reg, ta, SOURCE)
    return dx, reg


# split into equal pieces, stacked
def _split_rules(x, idx, ct):
    ta = TA(3, element_shape=(2, 2)).split(x, np.full(3, 2))
    reg = gradients.stack_grad({}, ta, ct, SOURCE)
    reg, dx = gradients.split_grad(reg, ta, SOURCE)
    return dx, reg


# split into ragged pieces (static lengths), concatenated back and weighted
_LENGTHS = np.array([3, 0, 1, 2])


def _ragged_fwd(x, idx):
    ta = jta.TensorArray(f32, 4, infer_shape=False, tensor_array_name="ta").split(x, _LENGTHS)
    return jnp.concatenate([ta.read(i) * (i + 1) for i in range(4)])


def _ragged_rules(x, idx, ct):
    ta = jta.TensorArray(f32, 4, infer_shape=False, tensor_array_name="ta").split(x, _LENGTHS)
    starts = np.concatenate([[0], np.cumsum(_LENGTHS)])
    reg = {}
    for i in range(4):
        reg = gradients.read_grad(reg, ta, i, ct[starts[i]:starts[i + 1]] * (i + 1), SOURCE)
    reg, dx = gradients.split_grad(reg, ta, SOURCE)
    return dx, reg


_ROW_W = jnp.arange(1.0, 7.0)[:, None]

OPS = {
    "write": OpCase(lambda x, i: _write_fwd(x, i).stack(),
                    lambda x, i: jnp.zeros((4, 2)).at[i[0]].set(x[0]).at[i[1]].set(x[1]),
                    _write_rules, _r(2, 2), np.array([3, 1])),
    "read": OpCase(_read_fwd, lambda x, i: x[i], _read_rules, _r(3, 2), np.array([2, 0, 2])),
    "stack": OpCase(_stack_fwd, lambda x, i: x, _stack_rules, _r(3, 2), np.array([0])),
    "unstack": OpCase(_unstack_fwd, lambda x, i: x[::-1], _unstack_rules, _r(3, 2), np.array([0])),
    "gather": OpCase(lambda x, i: TA(3).unstack(x).gather(i), lambda x, i: x[i], _gather_rules,
                     _r(3, 2), np.array([2, 0, 2, 1])),
    "scatter": OpCase(lambda x, i: TA(4).scatter(i, x).stack(), lambda x, i: jnp.zeros((4, 2)).at[i].set(x),
                      _scatter_rules, _r(3, 2), np.array([3, 0, 1])),
    "concat": OpCase(lambda x, i: TA(3, element_shape=(2, 2)).unstack(x).concat(),
                     lambda x, i: x.reshape(6, 2), _concat_rules, _r(3, 2, 2), np.array([0])),
    "split": OpCase(lambda x, i: TA(3, element_shape=(2, 2)).split(x, np.full(3, 2)).stack(),
                    lambda x, i: x.reshape(3, 2, 2), _split_rules, _r(6, 2), np.array([0])),
    "split-ragged": OpCase(_ragged_fwd, lambda x, i: x * jnp.repeat(jnp.arange(1.0, 5.0), _LENGTHS,
                                                                    total_repeat_length=6)[:, None],
                           _ragged_rules, _r(6, 2), np.array([0])),
}
op_param = pytest.mark.parametrize("op", list(OPS))


def _three_ways(op):
    c = OPS[op]

    def fn(x, idx, ct):
        out, vjp = jax.vjp(lambda v: c.jta(v, idx), x)
        ref_out, ref_vjp = jax.vjp(lambda v: c.ref(v, idx), x)
        grad = jax.grad(lambda v: jnp.sum(c.jta(v, idx) * ct))(x)
        rules, reg = c.rules(x, idx, ct)
        return (out, vjp(ct)[0], grad, rules), (ref_out, ref_vjp(ct)[0]), reg
    return fn


@pytest.mark.parametrize(("op", "mode"), [(op, m) for op in OPS for m in ("eager", "jit")] + [
    (op, "scan") for op in ("write", "read", "gather", "scatter", "split-ragged")])
def test_vjp_and_grad_match_plain_jnp_and_tf_rules(op, mode):
    c = OPS[op]
    ct = _r(*np.shape(c.ref(c.x, c.idx)))
    (out, vjp, grad, rules), (ref_out, ref_vjp), reg = run(mode, _three_ways(op), c.x, c.idx, ct)
    jta.throw(reg)
    assert_close(out, ref_out)
    assert_close(vjp, ref_vjp)
    assert_close(grad, ref_vjp)
    assert_close(rules, ref_vjp)


@pytest.mark.parametrize("mode", ["eager", "jit"])
@op_param
def test_jvp_matches_plain_jnp(op, mode):
    c = OPS[op]
    t = _r(*c.x.shape)

    def fn(x, idx, t):
        return jax.jvp(lambda v: c.jta(v, idx), (x,), (t,)), jax.jvp(lambda v: c.ref(v, idx), (x,), (t,))

    (out, tan), (ref_out, ref_tan) = run(mode, fn, c.x, c.idx, t)
    assert_close((out, tan), (ref_out, ref_tan))


@pytest.mark.parametrize("op", ["write", "gather"])
def test_linearize_and_jacfwd_agree_with_jacrev(op):
    c = OPS[op]
    f = jax.jit(lambda v: c.jta(v, c.idx))
    jr, jf = jax.jacrev(f)(c.x), jax.jacfwd(f)(c.x)
    assert_close(jr, jf)
    _, lin = jax.linearize(f, c.x)
    t = _r(*c.x.shape)
    assert_close(lin(t), jnp.tensordot(jr, t, axes=t.ndim))


# -- inside loops --------------------------------------------------------------------------------

T, H = 5, 3
_W, _XS, _H0 = _r(H, H) * 0.5, _r(T, H), _r(H)
_DY = _r(T, H)


def _rnn_ta(W, xs, h0):
    def step(carry, t):
        ta, h = carry
        h = jnp.tanh(W @ h + xs[t])
        return (ta.write(t, h), h), None

    (ta, _), _ = lax.scan(step, (TA(T, element_shape=(H,), clear_after_read=False), h0), jnp.arange(T))
    return ta


def _rnn_ref(W, xs, h0):
    def step(h, x):
        h = jnp.tanh(W @ h + x)
        return h, h
    return lax.scan(step, h0, xs)[1]


def _rnn_rules(W, xs, h0, dy):
    """TF's backward of the RNN: stack's gradient fills the accumulator; the gradient loop reads
    it back per step (Write's gradient), with the registry in the scan carry."""
    ta = _rnn_ta(W, xs, h0)
    reg = gradients.stack_grad({}, ta, dy, SOURCE)

    def back(carry, t):
        reg, dh, dW = carry
        reg, d_out = gradients.write_grad(reg, ta, t, SOURCE)
        h = ta.read(t)
        h_prev = jnp.where(t > 0, ta.read(jnp.maximum(t - 1, 0)), h0)
        dpre = (d_out + dh) * (1 - h * h)
        return (reg, W.T @ dpre, dW + jnp.outer(dpre, h_prev)), dpre

    (reg, dh0, dW), dxs = lax.scan(back, (reg, jnp.zeros(H), jnp.zeros((H, H))), jnp.arange(T), reverse=True)
    return (dW, dxs, dh0), reg


@mode_param
def test_rnn_in_scan_registry_carried_through_the_backward_scan(mode):
    def fn(W, xs, h0, dy):
        W, xs, h0, dy = map(jnp.asarray, (W, xs, h0, dy))
        loss = lambda f: lambda *a: jnp.sum(f(*a) * dy)  # noqa: E731
        ad = jax.grad(loss(lambda *a: _rnn_ta(*a).stack()), (0, 1, 2))(W, xs, h0)
        ref = jax.grad(loss(_rnn_ref), (0, 1, 2))(W, xs, h0)
        rules, reg = _rnn_rules(W, xs, h0, dy)
        return ad, ref, rules, reg

    ad, ref, rules, reg = run(mode, fn, _W, _XS, _H0, _DY)
    jta.throw(reg)
    assert_close(ad, ref, rtol=1e-5, atol=1e-5)
    assert_close(rules, ref, rtol=1e-5, atol=1e-5)
    assert list(reg) == [("ta", SOURCE)]


def _fori_reads(xs, w):
    """Reads at traced indices inside ``fori_loop``: sum_i w[i] * x[i]**2 read from an array."""
    ta = TA(T, element_shape=(H,)).unstack(xs)
    return lax.fori_loop(0, T, lambda i, acc: acc + w[i] * ta.read(i) ** 2, jnp.zeros(H))


def _fori_rules(xs, w, dy):
    ta = TA(T, element_shape=(H,)).unstack(xs)

    def back(j, reg):
        i = T - 1 - j
        return gradients.read_grad(reg, ta, i, dy * w[i] * 2 * ta.read(i), SOURCE)

    reg = lax.fori_loop(0, T, back, gradients.accumulator({}, ta, SOURCE)[0])
    return gradients.unstack_grad(reg, ta, SOURCE)


@mode_param
def test_reads_in_fori_loop(mode):
    w, dy = _r(T), _r(H)

    def fn(xs, w, dy):
        xs, w, dy = map(jnp.asarray, (xs, w, dy))
        ad = jax.vjp(_fori_reads, xs, w)[1](dy)
        ref = jax.vjp(lambda xs, w: jnp.sum(w[:, None] * xs ** 2, 0), xs, w)[1](dy)
        reg, rules = _fori_rules(xs, w, dy)
        return ad, ref, rules, reg

    ad, ref, rules, reg = run(mode, fn, _XS, w, dy)
    jta.throw(reg)
    assert_close(ad, ref)
    assert_close(rules, ref[0])


def _scatter_gather_loops(x, s):
    """Scan 1 scatters two rows per step at traced indices; scan 2 gathers two rows per step."""
    def put(ta, t):
        return ta.scatter(jnp.stack([2 * t, 2 * t + 1]), x[t] * s[t]), None

    ta, _ = lax.scan(put, TA(6, element_shape=(2,)), jnp.arange(3))

    def get(c, t):
        return c, ta.gather(jnp.stack([t, 5 - t]))

    return ta, lax.scan(get, 0, jnp.arange(3))[1]


def _scatter_gather_rules(x, s, dy):
    ta, _ = _scatter_gather_loops(x, s)

    def back_get(reg, t):  # gradient loop of scan 2: Gather -> scatter into the accumulator
        return gradients.gather_grad(reg, ta, jnp.stack([t, 5 - t]), dy[t], SOURCE), None

    reg, _ = lax.scan(back_get, gradients.accumulator({}, ta, SOURCE)[0], jnp.arange(3), reverse=True)

    def back_put(reg, t):  # gradient loop of scan 1: Scatter -> gather from the accumulator
        reg, d = gradients.scatter_grad(reg, ta, jnp.stack([2 * t, 2 * t + 1]), SOURCE)
        return reg, (d * s[t], jnp.sum(d * x[t]))

    reg, (dx, ds) = lax.scan(back_put, reg, jnp.arange(3), reverse=True)
    return (dx, ds), reg


@mode_param
def test_scatter_and_gather_in_scans(mode):
    x, s, dy = _r(3, 2, 2), _r(3), _r(3, 2, 2)

    def ref(x, s):
        rows = (x * s[:, None, None]).reshape(6, 2)
        return jnp.stack([rows[jnp.array([t, 5 - t])] for t in range(3)])

    def fn(x, s, dy):
        x, s, dy = map(jnp.asarray, (x, s, dy))
        ad = jax.vjp(lambda x, s: _scatter_gather_loops(x, s)[1], x, s)[1](dy)
        return ad, jax.vjp(ref, x, s)[1](dy), _scatter_gather_rules(x, s, dy)

    ad, want, (rules, reg) = run(mode, fn, x, s, dy)
    jta.throw(reg)
    assert_close(ad, want)
    assert_close(rules, want)


@mode_param
def test_split_and_concat_inside_a_scan_body(mode):
    """A fresh array per step: split the step's input into two pieces, concat them weighted."""
    xs, dy = _r(T, 4, 2), _r(T, 4, 2)

    def body(c, x):
        ta = TA(2, element_shape=(2, 2)).split(x, np.array([2, 2]))
        return c * 1.5, jnp.concatenate([ta.read(0) * c, ta.read(1) * 2.0])

    def f(xs, c0):
        return lax.scan(body, c0, xs)[1]

    def ref(xs, c0):
        cs = c0 * 1.5 ** jnp.arange(T)
        return jnp.concatenate([xs[:, :2] * cs[:, None, None], xs[:, 2:] * 2.0], 1)

    got = run(mode, lambda xs, c0, dy: (jax.vjp(f, xs, c0)[1](dy), jax.vjp(ref, xs, c0)[1](dy)),
              xs, jnp.float32(0.5), dy)
    assert_close(got[0], got[1])


# -- the registry and the raw state across a jit boundary ----------------------------------------

@jax.jit
def _add_read_grad(reg, ta, i, dv):
    return gradients.read_grad(reg, ta, i, dv, SOURCE)


@jax.jit
def _take_write_grad(reg, ta, i):
    return gradients.write_grad(reg, ta, i, SOURCE)


def test_registry_crosses_jit_as_input_and_output():
    ta = TA(3).unstack(_r(3, 2))
    reg = gradients.read_grad({}, ta, 1, np.float32([1, 2]), SOURCE)  # eager: creates the accumulator
    reg = _add_read_grad(reg, ta, 1, np.float32([10, 20]))  # jit: registry in and out
    reg = _add_read_grad(reg, ta, 2, np.float32([3, 4]))
    assert list(reg) == [("ta", SOURCE)] and reg[("ta", SOURCE)].is_dense
    reg, d1 = _take_write_grad(reg, ta, 1)
    assert_close(d1, [11.0, 22.0])
    reg, d2 = gradients.write_grad(reg, ta, 2, SOURCE)  # eager again
    assert_close(d2, [3.0, 4.0])
    # The read marks recorded inside jit survive the boundary: slot 1 was cleared.
    with pytest.raises(InvalidArgumentError, match=k_text(
            "TensorArray ta@gradients: Could not read index 1 twice because it was cleared after a previous "
            "read (perhaps try setting clear_after_read = false?).", "ta")):
        jta.throw(run_reporting("eager", _take_write_grad, reg, ta, 1))
    with pytest.raises(InvalidArgumentError, match=k_text(
            "TensorArray ta@gradients: Could not write to TensorArray index 2 because it has already been read.",
            "ta")):
        gradients.read_grad(reg, ta, 2, np.float32([1, 1]), SOURCE)


def test_registry_created_inside_jit_is_returned():
    @jax.jit
    def backward(x, ct):
        ta = TA(3).unstack(x)
        reg = gradients.gather_grad({}, ta, jnp.array([0, 2]), ct, SOURCE)
        return ta, reg

    ta, reg = backward(_r(3, 2), np.float32([[1, 2], [3, 4]]))
    reg, dx = gradients.unstack_grad(reg, ta, SOURCE)
    assert_close(dx, [[1.0, 2.0], [0.0, 0.0], [3.0, 4.0]])


def test_raw_state_with_accumulators_crosses_jit():
    s = ops.new_state()
    s, h, flow = ops.TensorArrayV3(s, 3, f32, element_shape=(2,), tensor_array_name="foo")
    s, flow = ops.TensorArrayScatterV3(s, h, np.arange(3), _r(3, 2), flow)
    s, gh, gflow = ops.TensorArrayGradV3(s, h, flow, SOURCE)

    @jax.jit
    def add(s, i, v):
        s, f = ops.TensorArrayWriteV3(s, gh, i, v, gflow)
        return s

    s = add(add(s, 0, np.float32([1, 2])), 0, np.float32([3, 4]))
    assert set(s.grads) == {(h, SOURCE)}
    s, total = jax.jit(lambda s: ops.TensorArrayGatherV3(s, gh, np.arange(3), gflow, f32))(s)
    assert_close(total, [[4.0, 6.0], [0.0, 0.0], [0.0, 0.0]])
    with pytest.raises(InvalidArgumentError, match=r"^TensorArray foo_0@gradients: Could not read index 0 twice"):
        jta.throw(ops.TensorArrayReadV3(s, gh, 0, gflow, f32)[0])


def test_jit_of_the_whole_tf_style_backward_is_reusable():
    """One jitted backward (registry built and consumed inside) serves many cotangents."""
    f = jax.jit(lambda x, idx, ct: _read_rules(x, idx, ct)[0])
    c = OPS["read"]
    for _ in range(3):
        ct = _r(3, 2)
        assert_close(f(c.x, c.idx, ct), jnp.zeros((3, 2)).at[c.idx].add(ct))
