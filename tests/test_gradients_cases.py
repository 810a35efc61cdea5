"""Spec §8 gradient cases 10–12, 26–28, 30, 31, 33–35, 37, 38, 40, 41, 47–50, 54, 55, 57, 60, 68–75.

Each case is one program text run through three routes, in every mode of ``tests.helpers.MODES``
(eagerly, under ``jax.jit``, as a ``lax.scan`` body, under ``jax.disable_jit()``):

* ``raw`` — mode K over ``jta.raw_ops``: the forward ops, then TF's backward graph
  (``tensor_array_grad.py``) built from ``TensorArrayGradV3`` and raw reads/writes on the
  accumulator (:class:`tests.helpers.Raw`);
* ``ta`` — the high-level API: ``jta.TensorArray`` + ``ta.grad`` + the rules of
  ``jta.gradients`` on an explicit registry (:class:`tests.helpers.Rules`);
* ``autodiff`` — ``jax.vjp`` of the same forward program built with ``jta.TensorArray``.

Errors are checked by class and exact mode-K text (``foo_<n>`` for raw arrays, ``foo`` for
``jta.TensorArray``). Case 76 (pfor Jacobian) is in ``test_gradients_vmap.py``; comparisons
against TensorFlow itself are in ``test_gradients_tf.py``.
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
from jta.errors import InvalidArgumentError
from tests.helpers import (
    BACKENDS,
    MODES,
    NAMES,
    SOURCE,
    Rules,
    assert_close,
    budget,
    expect_error,
    f32,
    k_text,
    run,
    with_backend,
    x64_if,
)

pytestmark = pytest.mark.rotate("mode")  # each case in one mode by default, all under --long

mode_param = pytest.mark.parametrize("mode", MODES)
api_param = pytest.mark.parametrize("api", list(BACKENDS))
NUMERIC = [np.float32, np.float64, np.int32, np.int64, np.complex64, np.complex128]
FLOATS = [np.float32, np.float64, np.complex64, np.complex128]


def convert(x, dtype):
    """TF's test converter: cast, and give complex values the imaginary part ``-x``."""
    x = np.asarray(x, np.float64)
    if np.dtype(dtype).kind == "c":
        x = x - 1j * x
    return x.astype(dtype)


def run_program(mode, api, build, *args):
    """Run ``build(backend, *args)`` in ``mode``; raise what the final state records."""
    tree, out = run(mode, with_backend(api, build), *args)
    jta.throw(tree)
    return out


# -- value cases: forward + TF-style backward (raw, ta) and jax.vjp (autodiff) -----------------

@dataclasses.dataclass
class GradCase:
    """``program(b, *inputs) -> (outputs, backward)``; ``backward(cotangents) -> input grads``."""

    program: Callable[..., Any]
    inputs: tuple
    cts: tuple
    grads: tuple  # expected input gradients
    outputs: Any = None  # expected forward outputs, when the spec gives them


def _case30(b, v0, v1):
    h = b.new(3, dtype=v0.dtype, infer_shape=False)
    b.write(h, 0, v0)
    b.write(h, 1, v1)
    r0_2 = b.peek(h, 0)  # not executed by TF (only its gradient is), so it cannot clear slot 0
    outs = (b.read(h, 0), b.read(h, 1), r0_2)

    def backward(cts):
        for i, c in zip((0, 1, 0), cts, strict=True):
            b.read_grad(h, i, c)
        dv1 = b.write_grad(h, 1)
        return b.write_grad(h, 0), dv1
    return outs, backward


def _case31(b, v0, v1):
    h = b.new(2, clear_after_read=False)
    b.write(h, 0, v0)
    b.write(h, 1, v1)
    p, r = b.stack(h), b.read(h, 0)
    s, lengths = b.concat(h)

    def backward(cts):
        dp, dr, ds = cts
        b.gather_grad(h, np.arange(2), dp)  # stack
        b.read_grad(h, 0, dr)
        b.concat_grad(h, lengths, ds)
        dv1 = b.write_grad(h, 1)
        return b.write_grad(h, 0), dv1
    return (p, r, s), backward


def _case33(b, x):
    h = b.new(2, clear_after_read=False)
    b.unstack(h, x)
    outs = (b.read(h, 0), b.read(h, 0), b.read(h, 1))

    def backward(cts):
        for i, c in zip((0, 0, 1), cts, strict=True):
            b.read_grad(h, i, c)
        return (b.scatter_grad(h, np.arange(2)),)
    return outs, backward


def _case34(b, x):
    h = b.new(2, infer_shape=False)
    b.split(h, x, np.array([2, 1]))
    c, lengths = b.concat(h)

    def backward(cts):
        b.concat_grad(h, lengths, cts[0])
        return (b.split_grad(h),)
    return (c,), backward


def _case35(b, x):
    h = b.new(0, dynamic_size=True)
    b.unstack(h, x)
    outs = (b.read(h, 0), b.read(h, 1))

    def backward(cts):
        b.read_grad(h, 0, cts[0])
        b.read_grad(h, 1, cts[1])
        return (b.scatter_grad(h, np.arange(2)),)
    return outs, backward


def _case37(dynamic):
    def program(b, v0, var, s0):
        """The while-loop RNN: out_t = v0[t] + var + state_t, state_{t+1} = state_t + v0[t]."""
        v0 = jnp.asarray(v0)
        kw = dict(dynamic_size=True, capacity=3) if dynamic else {}
        h = b.new(0 if dynamic else 3, element_shape=(5,), **kw)

        def body(carry, t):
            b.carry, st = carry
            b.write(h, t, v0[t] + var + st)
            return (b.carry, st + v0[t]), None

        (b.carry, _), _ = lax.scan(body, (b.carry, s0), jnp.arange(3))
        out = b.gather(h, jnp.arange(3))  # stack

        def backward(cts):
            b.gather_grad(h, jnp.arange(3), cts[0])

            def back(carry, t):  # the loop's gradient loop, registry/state in the carry
                b.carry, dst, dvar = carry
                d = b.write_grad(h, t)
                return (b.carry, dst + d, dvar + d), dst + d

            zeros = jnp.zeros(5, f32)
            (b.carry, ds0, dvar), dv0 = lax.scan(back, (b.carry, zeros, zeros), jnp.arange(3), reverse=True)
            return dv0, dvar, ds0
        return (out,), backward
    return program


def _case38(b, x):
    """GradSerialTwoLoops: loop 1 writes x, 2x, 4x, 8x, 16x; loop 2 writes zeros up to 100."""
    h = b.new(100, clear_after_read=False, element_shape=())

    def first(c):
        return c, x

    def body(i, carry):
        def later(c):
            b.carry = c
            return b.carry, b.read(h, i - 1) * 2.0

        b.carry, x1 = lax.cond(i == 0, first, later, carry)
        b.write(h, i, x1)
        return b.carry

    def zero(i, carry):
        b.carry = carry
        b.write(h, i, jnp.zeros((), f32))
        return b.carry

    b.carry = lax.fori_loop(0, 5, body, b.carry)
    b.carry = lax.fori_loop(5, 100, zero, b.carry)
    r = b.stack(h)

    def backward(cts):
        b.gather_grad(h, np.arange(100), cts[0])

        def back2(j, carry):
            b.carry = carry
            b.write_grad(h, 99 - j)
            return b.carry

        def back1(j, carry):
            b.carry, dx = carry
            i = 4 - j
            d = b.write_grad(h, i)

            def later(c):  # gradient of acc.read(i - 1) * 2
                b.carry = c
                b.read_grad(h, i - 1, 2.0 * d)
                return b.carry, dx

            return lax.cond(i > 0, later, lambda c: (c, dx + d), b.carry)

        b.carry = lax.fori_loop(0, 95, back2, b.carry)
        b.carry, dx = lax.fori_loop(0, 5, back1, (b.carry, jnp.zeros((), f32)))
        return (dx,)
    return (r,), backward


def _case40(b, a, bb):
    h = b.new(2)
    b.write(h, 0, a)
    b.write(h, 1, bb)
    c = b.read(h, 0) + b.read(h, 1)

    def backward(cts):
        # Two tf.gradients calls on one forward graph: sources "gradients" (d/da) and
        # "gradients_1" (d/db), each with both read gradients; nothing is double counted.
        for source in ("gradients", "gradients_1"):
            b.read_grad(h, 0, cts[0], source)
            b.read_grad(h, 1, cts[0], source)
        b.write_grad(h, 1, "gradients")  # the flow gradient of write(1) in the first call
        da = b.write_grad(h, 0, "gradients")
        return da, b.write_grad(h, 1, "gradients_1")
    return (c,), backward


def _case47(b, x):
    h = b.new(2)
    b.unstack(h, x)
    r = b.read(h, 0)

    def backward(cts):
        b.read_grad(h, 0, cts[0])
        return (b.scatter_grad(h, np.arange(2)),)
    return (r,), backward


def _case48(b, x0, x1):
    h = b.new(2)
    b.write(h, 0, x0)
    b.write(h, 1, x1)
    r = b.read(h, 0)

    def backward(cts):
        b.read_grad(h, 0, cts[0])
        dx1 = b.write_grad(h, 1)
        return b.write_grad(h, 0), dx1
    return (r,), backward


def _case49(b, x):
    h = b.new(3, dynamic_size=True)
    b.unstack(h, x)
    b.write(h, 3, jnp.float32(4.0))
    p = b.stack(h)

    def backward(cts):
        b.gather_grad(h, np.arange(4), cts[0])
        b.write_grad(h, 3)
        return (b.scatter_grad(h, np.arange(3)),)
    return (p,), backward


def _case50(b, x):
    h = b.new(3, dynamic_size=True)
    b.split(h, x, np.array([1, 1, 1]))
    b.write(h, 3, jnp.array([4.0], f32))
    c, lengths = b.concat(h)

    def backward(cts):
        b.concat_grad(h, lengths, cts[0])
        b.write_grad(h, 3)
        return (b.split_grad(h),)  # concat of marked_size (3) slots
    return (c,), backward


def _scatter_case(read_8):
    def program(b, x):
        h = b.new(0, dynamic_size=True)
        b.scatter(h, np.array([1, 8]), x)
        outs = (b.read(h, 1),) + ((b.read(h, 8),) if read_8 else ())

        def backward(cts):
            for i, c in zip((1, 8), cts, strict=False):  # case 55 reads index 1 only
                b.read_grad(h, i, c)
            return (b.scatter_grad(h, np.array([1, 8])),)
        return outs, backward
    return program


def _case57(b, x):
    h = b.new(0, dynamic_size=True)
    b.unstack(h, x)
    r = b.gather(h, np.array([1, 8]))

    def backward(cts):
        b.gather_grad(h, np.array([1, 8]), cts[0])
        return (b.scatter_grad(h, np.arange(10)),)
    return (r,), backward


def _case60(b, x):
    h = b.new(1, element_shape=(1,))
    b.write(h, 0, x[0])
    p = b.stack(h)

    def backward(cts):
        b.gather_grad(h, np.arange(1), cts[0])
        return (jnp.zeros_like(x).at[0].set(b.write_grad(h, 0)),)
    return (p,), backward


_rng = np.random.default_rng(37)
_V0, _VAR, _S0 = (_rng.standard_normal(s).astype(np.float32) for s in ((3, 5), (5,), (5,)))
_DY37 = -np.arange(15, dtype=np.float32).reshape(3, 5)
_CS = np.cumsum(_DY37[::-1], 0)[::-1]  # [dy0+dy1+dy2, dy1+dy2, dy2]
_OUT37 = _V0 + _VAR + np.stack([_S0, _S0 + _V0[0], _S0 + _V0[0] + _V0[1]])
_G0 = _rng.standard_normal((3, 5)).astype(np.float32)
_X57 = np.stack([np.arange(10.0), -np.arange(10.0)], 1).astype(np.float32)

CASES = {
    "30": GradCase(_case30, (np.float32([[4, 5]]), np.float32(3)),
                   (np.float32([[2, 3]]), np.float32(-2), np.float32([[1, -1]])),
                   ([[3.0, 2.0]], -2.0), ([[4.0, 5.0]], 3.0, [[4.0, 5.0]])),
    "31": GradCase(_case31, (np.float32([-1, 1]), np.float32([-10, 10])),
                   (np.float32([[2, 3], [4, 5]]), np.float32([-0.5, 1.5]), np.float32([20, 30, 40, 50])),
                   ([21.5, 34.5], [44.0, 55.0]),
                   ([[-1, 1], [-10, 10]], [-1, 1], [-1, 1, -10, 10])),
    "33": GradCase(_case33, (np.float32([[1, -1], [10, -10]]),),
                   (np.float32([2, 3]), np.float32([-1.5, 1.5]), np.float32([4, 5])),
                   ([[0.5, 4.5], [4.0, 5.0]],), ([1, -1], [1, -1], [10, -10])),
    "34": GradCase(_case34, (np.float32([[1, 2], [3, 4], [5, 6]]),),
                   (np.float32([[2, -2], [20, -20], [200, -200]]),),
                   ([[2, -2], [20, -20], [200, -200]],), ([[1, 2], [3, 4], [5, 6]],)),
    "35": GradCase(_case35, (np.float32([[1, -1], [10, -10]]),), (np.float32([2, 3]), np.float32([4, 5])),
                   ([[2.0, 3.0], [4.0, 5.0]],), ([1, -1], [10, -10])),
    "37": GradCase(_case37(False), (_V0, _VAR, _S0), (_DY37,), (_CS, _DY37.sum(0), _DY37.sum(0)), (_OUT37,)),
    "37-dynamic": GradCase(_case37(True), (_V0, _VAR, _S0), (_DY37,), (_CS, _DY37.sum(0), _DY37.sum(0)),
                           (_OUT37,)),
    "38": GradCase(_case38, (np.float32(2),), (np.ones(100, np.float32),), (31.0,),
                   (np.float32([2, 4, 8, 16, 32] + [0] * 95),)),
    "40": GradCase(_case40, (_V0, _G0), (_G0,), (_G0, _G0), (_V0 + _G0,)),
    "47": GradCase(_case47, (np.float32([2, 3]),), (np.float32(1),), ([1.0, 0.0],), (2.0,)),
    "48": GradCase(_case48, (np.float32(5), np.float32(10)), (np.float32(1),), (1.0, 0.0), (5.0,)),
    "49": GradCase(_case49, (np.float32([1, 2, 3]),), (np.ones(4, np.float32),), ([1.0, 1, 1],),
                   ([1.0, 2, 3, 4],)),
    "50": GradCase(_case50, (np.float32([1, 2, 3]),), (np.ones(4, np.float32),), ([1.0, 1, 1],),
                   ([1.0, 2, 3, 4],)),
    "54": GradCase(_scatter_case(True), (np.float32([[1, -1], [10, -10]]),),
                   (np.float32([2, 3]), np.float32([4, 5])), ([[2.0, 3], [4, 5]],), ([1, -1], [10, -10])),
    "55": GradCase(_scatter_case(False), (np.float32([[1, -1], [10, -10]]),), (np.float32([2, 3]),),
                   ([[2.0, 3], [0, 0]],), ([1, -1],)),
    "57": GradCase(_case57, (_X57,), (np.float32([[2, 3], [4, 5]]),),
                   (np.float32([[0, 0], [2, 3]] + [[0, 0]] * 6 + [[4, 5], [0, 0]]),), ([[1, -1], [8, -8]],)),
    "60": GradCase(_case60, (np.float32([[1.42]]),), (np.float32([[0.25]]),), ([[0.25]],), ([[1.42]],)),
}
# Every case eagerly and under jit; the loop programs and a few others also as a scan body and
# under disable_jit (where the other programs run the same code as eagerly).
_ALL_MODES = {"31", "37", "37-dynamic", "38", "50", "57"}
case_mode_param = pytest.mark.parametrize(("case", "mode"), [
    pytest.param(c, m, id=f"{c}-{m}") for c in CASES for m in MODES if c in _ALL_MODES or m in ("eager", "jit")])


def _tf_style(program, n_inputs):
    def fn(b, *args):
        outs, backward = program(b, *args[:n_inputs])
        return outs, backward(tuple(args[n_inputs:]))
    return fn


# Each case through both APIs under --long; by default through one, alternating from case to case
# (raw ops and jta.gradients run the same kernels; each API still meets every mode).
tf_style_param = pytest.mark.parametrize(("case", "mode", "api"), [
    pytest.param(c, m, a, id=f"{c}-{m}-{a}")
    for k, c in enumerate(CASES) for m in MODES if c in _ALL_MODES or m in ("eager", "jit")
    for a in BACKENDS if budget.LONG or a == list(BACKENDS)[(k + MODES.index(m)) % len(BACKENDS)]])


@tf_style_param
def test_gradient_case_tf_style(case, api, mode):
    """Forward + TF's backward graph through raw ops (mode K) and through jta.gradients."""
    c = CASES[case]
    outs, grads = run_program(mode, api, _tf_style(c.program, len(c.inputs)), *c.inputs, *c.cts)
    assert_close(grads, c.grads)
    if c.outputs is not None:
        assert_close(outs, c.outputs)


def _vjp(program, n_inputs):
    def fn(*args):
        outs, vjp = jax.vjp(lambda *x: program(Rules(), *x)[0], *args[:n_inputs])
        return outs, vjp(tuple(args[n_inputs:]))
    return fn


@case_mode_param
def test_gradient_case_autodiff(case, mode):
    """``jax.vjp`` of the same forward program built with ``jta.TensorArray``."""
    c = CASES[case]
    outs, grads = run(mode, _vjp(c.program, len(c.inputs)), *c.inputs, *c.cts)
    assert_close(grads, c.grads)
    if c.outputs is not None:
        assert_close(outs, c.outputs)


@pytest.mark.parametrize("route", ["raw", "ta", "autodiff"])
@pytest.mark.parametrize(("dtype", "mode"), [(d, m) for d in FLOATS for m in ("eager", "jit")],
                         ids=lambda v: np.dtype(v).name if not isinstance(v, str) else v)
def test_case30_dtypes(route, dtype, mode):
    """Case 30 for float32/64 and complex64/128 (complex values with imaginary part -x)."""
    with x64_if(dtype):
        c = CASES["30"]
        inputs = tuple(convert(x, dtype) for x in c.inputs)
        cts = tuple(convert(x, dtype) for x in c.cts)
        if route == "autodiff":
            _, grads = run(mode, _vjp(c.program, 2), *inputs, *cts)
        else:
            _, grads = run_program(mode, route, _tf_style(c.program, 2), *inputs, *cts)
        assert_close(grads, tuple(convert(g, dtype) for g in c.grads))
        assert all(np.asarray(g).dtype == np.dtype(dtype) for g in grads)


@pytest.mark.parametrize("route", ["raw", "ta", "autodiff"])
def test_case40_separate_gradient_calls(route):
    """Case 40 run as two separate gradient computations (each gives g0), and the registry
    holds one accumulator per source."""
    def grads_for(which):
        if route == "autodiff":
            program = CASES["40"].program
            return jax.grad(lambda a, bb: jnp.sum(program(Rules(), a, bb)[0][0] * _G0), which)(_V0, _G0)

        b = BACKENDS[route]()
        (_,), _ = _case40(b, _V0, _G0)
        h = "foo" if route == "ta" else "foo_0"
        b.read_grad(h, 0, _G0)
        b.read_grad(h, 1, _G0)
        d1 = b.write_grad(h, 1)
        d0 = b.write_grad(h, 0)
        keys = set(b.registry if route == "ta" else b.state.grads)
        assert keys == {(h, SOURCE)}
        return d0 if which == 0 else d1

    assert_close(grads_for(0), _G0)
    assert_close(grads_for(1), _G0)


@api_param
def test_case40_two_sources_are_two_accumulators(api):
    b = BACKENDS[api]()
    c = CASES["40"]
    _, (da, db) = _tf_style(c.program, 2)(b, *c.inputs, *c.cts)
    registry = b.registry if api == "ta" else b.state.grads
    assert sorted(s for _, s in registry) == ["gradients", "gradients_1"]
    assert_close((da, db), (_G0, _G0))


# -- 10-12: accumulators are separate arrays, shared by source -----------------------------------

def _case10(b, v):
    h = b.new(3, infer_shape=False)
    g = b.grad(h, "grad")
    for i, x in enumerate(([[4.0, 5.0]], [[1.0]], -3.0)):
        b.write(h, i, np.float32(x))
    for i, x in enumerate(([[5.0, 6.0]], [[2.0]], -2.0)):
        b.write(g, i, np.float32(x))
    return [b.read(h, i) for i in range(3)], [b.read(g, i) for i in range(3)]


def _case11(b, v):
    h = b.new(0, dynamic_size=True, infer_shape=False)
    for i, x in enumerate(([[4.0, 5.0]], [[1.0]], -3.0)):
        b.write(h, i, np.float32(x))
    g = b.grad(h, "grad")
    for i, x in enumerate(([[5.0, 6.0]], [[2.0]], -2.0)):
        b.write(g, i, np.float32(x))
    sizes = b.size(h), b.size(g)
    return [b.read(h, i) for i in range(3)], [b.read(g, i) for i in range(3)], sizes


@mode_param
@api_param
@pytest.mark.parametrize("build", [_case10, _case11], ids=["case10", "case11"])
def test_case10_11_accumulator_has_its_own_storage(api, mode, build):
    out = run_program(mode, api, build, np.float32(0))
    assert_close(out[0], ([[4.0, 5.0]], [[1.0]], -3.0))
    assert_close(out[1], ([[5.0, 6.0]], [[2.0]], -2.0))
    if build is _case11:
        assert_close(out[2], (3, 3))


@mode_param
@api_param
def test_case12_same_source_same_accumulator(api, mode):
    def build(b, v):
        h = b.new(3, infer_shape=False)
        g1 = b.grad(h, "grad")
        g2 = b.grad(h, "grad")
        assert g1 == g2
        b.write(g1, 0, v)
        return b.read(g2, 0)

    assert_close(run_program(mode, api, build, np.float32([[4, 5]])), [[4.0, 5.0]])


def test_case12_high_level_grad_returns_the_registered_accumulator():
    ta = jta.TensorArray(f32, 3, tensor_array_name="foo", element_shape=(1, 2))
    ta, g1, reg = ta.grad("grad", {})
    reg = gradients.put(reg, g1.write(0, np.float32([[4, 5]])))
    _, g2, reg = ta.grad("grad", reg)
    assert_close(g2.read(0), [[4.0, 5.0]])
    assert list(reg) == [("foo", "grad")]


# -- 26-28: aggregation, WithShape ---------------------------------------------------------------

@api_param
@pytest.mark.parametrize(("dtype", "mode"), [(d, m) for d in NUMERIC for m in (MODES if d == np.float32
                                                                                else ("eager", "jit"))],
                         ids=lambda v: np.dtype(v).name if not isinstance(v, str) else v)
def test_case26_accumulator_sums_writes(api, mode, dtype):
    def build(b, v):
        h = b.new(3, dtype=dtype, infer_shape=False)
        g = b.grad(h, "grad")
        for x in (3, 4, 5):
            b.write(g, 2, convert(x, dtype))
        return b.read(g, 2)

    with x64_if(dtype):
        out = run_program(mode, api, build, np.float32(0))
        assert_close(out, convert(12, dtype))
        assert np.asarray(out).dtype == np.dtype(dtype)


@mode_param
@api_param
def test_case26_forward_double_write_fails(api, mode):
    def build(b, v):
        h = b.new(3, infer_shape=False)
        b.grad(h, "grad")
        b.write(h, 2, np.float32(3))
        b.write(h, 2, np.float32(4))

    expect_error(mode, with_backend(api, build), InvalidArgumentError,
                 k_text("TensorArray NAME: Could not write to TensorArray index 2 because it has already been "
                        "written to.", NAMES[api]), np.float32(0))


@mode_param
@api_param
def test_case26_aggregate_shape_mismatch(api, mode):
    def build(b, v):
        h = b.new(3, infer_shape=False)
        g = b.grad(h, "grad")
        b.write(g, 1, np.float32(1))
        b.write(g, 1, np.float32([1]))

    expect_error(mode, with_backend(api, build), InvalidArgumentError,
                 k_text("TensorArray NAME@grad: Could not aggregate to TensorArray index 1 because the "
                        "existing shape is [] but the new input shape is [1].", NAMES[api]), np.float32(0))


@mode_param
@api_param
def test_case27_with_shape_prepends_to_a_known_element_shape(api, mode):
    def build(b, x):
        h = b.new(3, element_shape=(2, 3))
        g = b.grad(h, "source", shape_to_prepend=[4, 5])
        assert b.array(g).element_shape == (4, 5, 2, 3)  # TF's static read shape: [None, None, 2, 3]
        b.write(g, 0, x)
        return b.read(g, 0), b.read(g, 1)

    x = np.arange(120, dtype=np.float32).reshape(4, 5, 2, 3)
    back, zeros = run_program(mode, api, build, x)
    assert_close(back, x)
    assert_close(zeros, np.zeros((4, 5, 2, 3)))

    def wrong(b, v):
        h = b.new(3, element_shape=(2, 3))
        g = b.grad(h, "source", shape_to_prepend=[4, 5])
        b.write(g, 0, np.zeros((2, 3), np.float32))

    expect_error(mode, with_backend(api, wrong), InvalidArgumentError,
                 k_text("TensorArray NAME@source: Could not write to TensorArray index 0 because the value "
                        "shape is [2,3] which is incompatible with the TensorArray's inferred element shape: "
                        "[4,5,2,3] (consider setting infer_shape=False).", NAMES[api]), np.float32(0))


@mode_param
@api_param
def test_case28_with_shape_and_unknown_element_shape(api, mode):
    def build(b, x):
        h = b.new(3, infer_shape=False)
        g = b.grad(h, "source", shape_to_prepend=[4, 5])
        assert b.array(g).element_shape is None  # unknown rank
        b.write(g, 0, x)
        return b.read(g, 0)

    x = np.arange(140, dtype=np.float32).reshape(4, 5, 7)
    assert_close(run_program(mode, api, build, x), x)


# -- 41: _GetGradSource --------------------------------------------------------------------------

@pytest.mark.parametrize(("name", "source"), [
    ("gradients:0", "gradients:0"), ("gradients_0:0", "gradients_0:0"),
    ("gradients/foo:0", "gradients"), ("gradients/foo/bar:0", "gradients"),
    ("gradients_0/foo:0", "gradients_0"), ("gradients_0/foo/bar:0", "gradients_0"),
    ("foo/gradients:0", "foo/gradients:0"), ("foo/gradients/bar:0", "foo/gradients"),
    ("foo/bar/gradients_0/baz:0", "foo/bar/gradients_0"),
    ("foo/gradients/bar/gradients_0/baz:0", "foo/gradients/bar/gradients_0"),
    ("gradients", "gradients"), ("gradients_1/TensorArrayGrad/TensorArrayGradV3", "gradients_1"),
])
def test_case41_grad_source(name, source):
    assert gradients.grad_source(name) == source


@pytest.mark.parametrize("name", ["", "foo", "foo/bar", "Const:0", "foo/bar:0"])
def test_case41_grad_source_needs_a_gradients_scope(name):
    text = (f"Expected op/tensor name to start with gradients (excluding scope), got: {name}. This means "
            "that a tf.gradients op with this op in its dependency path has a custom name that does not start "
            "with 'gradients'. Please make sure all calls to tf.gradients that have non-empty `name` arguments "
            "use names that start with 'gradients'.")
    with pytest.raises(ValueError, match=k_text(text)):
        gradients.grad_source(name)


# -- 68-75: accumulator semantics and errors -----------------------------------------------------

@mode_param
@api_param
def test_case68_sources_are_independent(api, mode):
    def build(b, v):
        h = b.new(1, element_shape=(1, 2))
        a = b.grad(h, "a")
        g = b.grad(h, "b")
        b.write(a, 0, v)
        return b.read(g, 0), b.read(a, 0)

    zeros, back = run_program(mode, api, build, np.float32([[4, 5]]))
    assert_close(zeros, [[0.0, 0.0]])
    assert_close(back, [[4.0, 5.0]])


@mode_param
@api_param
def test_case69_soft_zeros_and_unknown_shape_read(api, mode):
    def build(b, v):
        h = b.new(3, infer_shape=False)
        b.write(h, 0, v)
        g = b.grad(h, "grad")
        return b.read(g, 0)

    assert_close(run_program(mode, api, build, np.float32([[1, 2, 3]])), [[0.0, 0.0, 0.0]])

    def unknown(b, v):
        h = b.new(3, infer_shape=False)
        b.write(h, 0, v)
        b.read(b.grad(h, "grad"), 1)

    expect_error(mode, with_backend(api, unknown), InvalidArgumentError,
                 k_text("TensorArray NAME@grad: Could not read from TensorArray index 1.  Furthermore, the element "
                        "shape is not fully defined: <unknown>.  It is possible you are working with a resizeable "
                        "TensorArray and stop_gradients is not allowing the gradients to be written.  If you set "
                        "the full element_shape property on the forward TensorArray, the proper all-zeros tensor "
                        "will be returned instead of incurring this error.", NAMES[api]), np.float32([[1, 2, 3]]))


@mode_param
@api_param
def test_case70_accumulator_read_past_the_end_grows_it(api, mode):
    def build(b, v):
        h = b.new(3, element_shape=(2,))
        g = b.grad(h, "grad")
        size0 = b.size(g)
        return size0, b.read(g, 7), b.size(g)

    size0, zeros, size = run_program(mode, api, build, np.float32(0))
    assert (int(size0), int(size)) == (3, 8)
    assert_close(zeros, [0.0, 0.0])

    def negative(b, v):
        h = b.new(3, element_shape=(2,))
        b.read(b.grad(h, "grad"), -1)

    expect_error(mode, with_backend(api, negative), InvalidArgumentError,
                 k_text("Tried to read from index -1 but array size is: 3", NAMES[api]), np.float32(0))


@mode_param
@api_param
def test_case71_grad_freezes_a_dynamic_forward(api, mode):
    def late_write(b, v):
        h = b.new(0, dynamic_size=True)
        b.write(h, 0, v)
        b.grad(h, "grad")
        b.write(h, 1, v)

    expect_error(mode, with_backend(api, late_write), InvalidArgumentError,
                 k_text("TensorArray NAME: Tried to write to index 1 but array is not resizeable and size "
                        "is: 1", NAMES[api]), np.float32(0))

    def late_scatter(b, v):
        h = b.new(0, dynamic_size=True, element_shape=())
        b.grad(h, "grad")
        b.scatter(h, np.array([0]), jnp.reshape(v, (1,)))

    expect_error(mode, with_backend(api, late_scatter), InvalidArgumentError,
                 k_text("Max scatter index must be < array size (0 vs. 0)", NAMES[api]), np.float32(0))

    def empty_grad(b, v):
        h = b.new(0, dynamic_size=True)
        b.write(b.grad(h, "grad"), 0, v)

    expect_error(mode, with_backend(api, empty_grad), InvalidArgumentError,
                 k_text("TensorArray NAME@grad: Tried to write to index 0 but array is not resizeable and "
                        "size is: 0", NAMES[api]), np.float32(0))


@mode_param
@api_param
def test_case72_grad_of_closed_forward_and_of_a_gradient(api, mode):
    def closed(b, v):
        h = b.new(3)
        b.close(h)
        b.grad(h, "grad")

    expect_error(mode, with_backend(api, closed), InvalidArgumentError,
                 k_text("TensorArray NAME has already been closed.", NAMES[api]), np.float32(0))

    def grad_of_grad(b, v):
        h = b.new(3)
        b.grad(b.grad(h, "grad"), "grad")

    expect_error(mode, with_backend(api, grad_of_grad), InvalidArgumentError,
                 k_text("Wrong input container. _tensor_array_gradsNAME@grad", NAMES[api]), np.float32(0))


@mode_param
@api_param
@pytest.mark.parametrize("shape", [(), None], ids=["dense", "slots"])
def test_case73_accumulator_clears_after_read(api, mode, shape):
    def twice(b, v):
        h = b.new(3, element_shape=shape, infer_shape=shape is not None)
        if shape is None:
            b.write(h, 2, v)  # soft zero of shape [] in the accumulator
        g = b.grad(h, "grad")
        b.write(g, 2, v)
        b.read(g, 2)
        b.read(g, 2)

    expect_error(mode, with_backend(api, twice), InvalidArgumentError,
                 k_text("TensorArray NAME@grad: Could not read index 2 twice because it was cleared after a "
                        "previous read (perhaps try setting clear_after_read = false?).", NAMES[api]), np.float32(0))

    def write_after_read(b, v):
        h = b.new(3, element_shape=shape, infer_shape=shape is not None)
        if shape is None:
            b.write(h, 2, v)
        g = b.grad(h, "grad")
        b.read(g, 2)
        b.write(g, 2, v)

    expect_error(mode, with_backend(api, write_after_read), InvalidArgumentError,
                 k_text("TensorArray NAME@grad: Could not write to TensorArray index 2 because it has already "
                        "been read.", NAMES[api]), np.float32(0))


@mode_param
@api_param
def test_case73_through_the_backward_rules(api, mode):
    """The same errors reached through the rules: two Write gradients of one slot, and a Read
    gradient after the Write gradient (a program whose flow order is wrong)."""
    def twice(b, v):
        h = b.new(3, element_shape=())
        b.read_grad(h, 2, v)
        b.write_grad(h, 2)
        b.write_grad(h, 2)

    expect_error(mode, with_backend(api, twice), InvalidArgumentError,
                 k_text("TensorArray NAME@gradients: Could not read index 2 twice because it was cleared "
                        "after a previous read (perhaps try setting clear_after_read = false?).", NAMES[api]), np.float32(0))

    def late(b, v):
        h = b.new(3, element_shape=())
        b.write_grad(h, 2)
        b.read_grad(h, 2, v)

    expect_error(mode, with_backend(api, late), InvalidArgumentError,
                 k_text("TensorArray NAME@gradients: Could not write to TensorArray index 2 because it has "
                        "already been read.", NAMES[api]), np.float32(0))


@mode_param
@api_param
def test_case74_soft_zero_shape_and_sums(api, mode):
    def build(b, v):
        h = b.new(3, infer_shape=False)
        b.write(h, 0, np.float32([1]))
        g = b.grad(h, "grad")
        b.write(g, 0, v)
        b.write(g, 0, v + 1)
        return b.read(g, 0)

    assert_close(run_program(mode, api, build, np.float32([5])), [11.0])

    def wrong(b, v):
        h = b.new(3, infer_shape=False)
        b.write(h, 0, np.float32([1]))
        b.write(b.grad(h, "grad"), 0, np.float32([1, 2]))

    expect_error(mode, with_backend(api, wrong), InvalidArgumentError,
                 k_text("TensorArray NAME@grad: Could not aggregate to TensorArray index 0 because the "
                        "existing shape is [1] but the new input shape is [2].", NAMES[api]), np.float32(0))


@mode_param
@api_param
def test_case75_with_shape_registry_and_zeros(api, mode):
    def build(b, v):
        h1 = b.new(3, element_shape=(2,), name="foo")
        g = b.grad(h1, "s")
        g_again = b.grad(h1, "s", shape_to_prepend=[4])  # the existing, un-prepended array
        existing = b.read(g_again, 0)
        h2 = b.new(3, infer_shape=False, name="bar")
        b.write(h2, 0, v)
        unknown = b.read(b.grad(h2, "s", shape_to_prepend=[4]), 0)
        h3 = b.new(3, element_shape=(2, 3), name="baz")
        known = b.read(b.grad(h3, "s", shape_to_prepend=[4, 5]), 0)
        empty = b.read(b.grad(h3, "t", shape_to_prepend=[]), 0)
        assert g == g_again
        return existing, unknown, known, empty

    existing, unknown, known, empty = run_program(mode, api, build, np.ones(7, np.float32))
    assert_close((existing, unknown, known, empty),
                 (np.zeros(2), np.zeros((4, 7)), np.zeros((4, 5, 2, 3)), np.zeros((2, 3))))


@api_param
def test_grad_handles_are_name_at_source(api):
    b = BACKENDS[api]()
    h = b.new(3, element_shape=(2,))
    g = b.grad(h, "mysource")
    assert g == f"{h}@mysource"
    assert b.array(g).name == g


# -- split/concat on accumulators (V13, hazard H1) -----------------------------------------------

@mode_param
@api_param
def test_split_gradient_of_an_untouched_accumulator_is_zeros(api, mode):
    """V13: after a forward split, Concat on an accumulator nobody wrote gives zeros of the
    forward pieces' shapes (Split's gradient when the split values were never read)."""
    def build(b, x):
        h = b.new(3, infer_shape=False)
        b.split(h, x, np.array([1, 2, 0]))
        return b.split_grad(h)

    assert_close(run_program(mode, api, build, np.ones((3, 2), np.float32)), np.zeros((3, 2)))


@mode_param
@api_param
@pytest.mark.parametrize("shape", [(2,), None], ids=["dense", "slots"])
def test_hazard_h1_concat_of_an_accumulator_without_forward_split(api, mode, shape):
    """TF aborts the process (bad_alloc) here; jta raises a clear error."""
    def build(b, x):
        h = b.new(3, element_shape=shape, infer_shape=shape is not None)
        b.unstack(h, x)
        b.split_grad(h)

    with pytest.raises(InvalidArgumentError, match=r"^TensorArray " + BACKENDS[api].name_re +
                       r"@gradients: cannot concat a gradient array whose forward array was never split"):
        run_program(mode, api, build, np.ones((3, 2), np.float32))


def test_registry_keys_are_names_distinct_names_are_independent():
    """The registry is keyed by the arrays' names (TF's ``<name>@<source>``): two forward arrays
    sharing one registry need distinct ``tensor_array_name``s."""
    a = jta.TensorArray(f32, 2, element_shape=(), tensor_array_name="a")
    b = jta.TensorArray(f32, 2, element_shape=(), tensor_array_name="b")
    reg = gradients.read_grad({}, a, 0, 1.0, SOURCE)
    reg = gradients.read_grad(reg, b, 0, 10.0, SOURCE)
    assert sorted(reg) == [("a", SOURCE), ("b", SOURCE)]
    reg, da = gradients.write_grad(reg, a, 0, SOURCE)
    reg, db = gradients.write_grad(reg, b, 0, SOURCE)
    assert (float(da), float(db)) == (1.0, 10.0)


def test_put_rejects_arrays_that_are_not_accumulators_of_the_registry():
    ta = jta.TensorArray(f32, 2, element_shape=(), tensor_array_name="a")
    reg = gradients.accumulator({}, ta, SOURCE)[0]
    with pytest.raises(ValueError, match="is not an accumulator of this registry"):
        gradients.put(reg, ta)
    other = jta.TensorArray(f32, 2, element_shape=(), tensor_array_name="b")
    with pytest.raises(ValueError, match="is not an accumulator of this registry"):
        gradients.put(reg, gradients.accumulator({}, other, SOURCE)[1])
