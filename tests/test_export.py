"""Exportable programs: jta programs and their checks lower with ``jax.export`` and run again.

``jta.checkify(f)`` turns every check of ``f`` into data: W1-W3 written with ``jta.TensorArray``
(write, read, read-after-write), their gradients, a ``dynamic_size`` TensorArray decoder in
``lax.while_loop``, and raw-op programs (a write loop and its gradient, a read loop, a
``dynamic_size`` decoder) lower with ``jax.export`` for cpu, cuda and tpu
with no host callback, and with no conditional in a loop body that checks add (the only one left
is XLA:CPU's opaque read in a differentiated loop, ``jta._core.buffer.read_row_opaque``, there with
``checks=False`` too). The deserialized cpu export computes the same values, and an error recorded
inside the exported function surfaces by the documented rule: ``jta.throw(errors)`` on the
:class:`jta.ErrorRecord` it returns.
"""

from __future__ import annotations

import functools
import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jta
from jta import raw_ops as ops

T, D = 6, 4
CALLBACKS = re.compile(r"custom_call @\w*callback", re.IGNORECASE)  # xla_python_cpu_callback, ...


def _new(size, **kw):
    state, h, flow = ops.TensorArrayV3(ops.new_state(), size, jnp.float32, element_shape=(D,), **kw)
    return state, h, flow


def write_loop(xs):
    """W1 in raw ops: write h_t every step, then gather everything."""
    state, h, flow = _new(T)

    def body(carry, t_x):
        (state, flow, hid), (t, x) = carry, t_x
        hid = jnp.tanh(x + hid)
        state, flow = ops.TensorArrayWriteV3(state, h, t, hid, flow)
        return (state, flow, hid), None

    (state, flow, _), _ = jax.lax.scan(body, (state, flow, jnp.zeros(D)), (jnp.arange(T), xs))
    state, out = ops.TensorArrayGatherV3(state, h, jnp.arange(T), flow, jnp.float32)
    return state, out


def read_loop(xs, index_shift):
    """W2 in raw ops: unstack, then read slot t + shift in every step (clear_after_read off)."""
    state, h, flow = _new(T, clear_after_read=False)
    state, flow = ops.TensorArrayScatterV3(state, h, jnp.arange(T), xs, flow)

    def body(carry, t):
        state, hid = carry
        state, x = ops.TensorArrayReadV3(state, h, t + index_shift, flow, jnp.float32)
        return (state, jnp.tanh(x + hid)), None

    (state, hid), _ = jax.lax.scan(body, (state, jnp.zeros(D)), jnp.arange(T))
    return state, hid


def decoder(x0, steps):
    """A dynamic_size decoder in lax.while_loop: grows up to its capacity at traced indices."""
    state, h, flow = _new(0, dynamic_size=True, capacity=T)

    def cond(c):
        return c[0] < steps

    def body(c):
        t, state, flow, hid = c
        hid = jnp.tanh(hid + 1.0)
        state, flow = ops.TensorArrayWriteV3(state, h, t, hid, flow)
        return t + 1, state, flow, hid

    _, state, flow, _ = jax.lax.while_loop(cond, body, (jnp.int32(0), state, flow, x0))
    state, n = ops.TensorArraySizeV3(state, h, flow)
    return state, n


def write_loop_grad(xs):
    return jax.grad(lambda v: jnp.sum(write_loop(v)[1] ** 2))(xs)


def w1(W, xs, checks=True):
    """W1: write h_t every step, then stack."""
    ta = jta.TensorArray(jnp.float32, size=T, element_shape=(D,), checks=checks)

    def step(carry, t):
        h, ta = carry
        h = jnp.tanh(h @ W + xs[t])
        return (h, ta.write(t, h)), None

    (_, ta), _ = jax.lax.scan(step, (jnp.zeros(D), ta), jnp.arange(T))
    return ta.stack()


def w2(W, xs, checks=True):
    """W2: unstack the inputs, read one every step (a closed-over array)."""
    ta = jta.TensorArray(jnp.float32, size=T, element_shape=(D,), checks=checks).unstack(xs)
    return jax.lax.scan(lambda h, t: (jnp.tanh(h @ W + ta.read(t)), None), jnp.zeros(D), jnp.arange(T))[0]


def w3(W, xs, checks=True):
    """W3: every step reads what the previous one wrote."""
    ta = jta.TensorArray(jnp.float32, size=T + 1, element_shape=(D,), clear_after_read=False,
                         checks=checks).write(0, jnp.zeros(D))

    def step(ta, t):
        return ta.write(t + 1, jnp.tanh(ta.read(t) @ W + xs[t])), None

    return jax.lax.scan(step, ta, jnp.arange(T))[0].stack()


def ta_decoder(x0, steps):
    """A ``dynamic_size`` jta.TensorArray decoder in lax.while_loop, grown at traced indices."""
    ta = jta.TensorArray(jnp.float32, size=0, dynamic_size=True, capacity=T, element_shape=(D,))

    def body(c):
        t, ta, h = c
        h = jnp.tanh(h + 1.0)
        return t + 1, ta.write(t, h), h

    _, ta, _ = jax.lax.while_loop(lambda c: c[0] < steps, body, (jnp.int32(0), ta, x0))
    return ta.size(), ta.gather(jnp.arange(T - 2))


def gradient(f):
    def g(W, xs, checks=True):
        return jax.grad(lambda W: jnp.sum(f(W, xs, checks) ** 2))(W)
    g.__name__ = f"{f.__name__}_gradient"
    return g


XS = jnp.linspace(-1, 1, T * D, dtype=jnp.float32).reshape(T, D)
WW = jnp.eye(D, dtype=jnp.float32) / 2
PROGRAMS = {
    "W1": (w1, (WW, XS)),
    "W2": (w2, (WW, XS)),
    "W3": (w3, (WW, XS)),
    "W1 gradient": (gradient(w1), (WW, XS)),
    "W2 gradient": (gradient(w2), (WW, XS)),
    "W3 gradient": (gradient(w3), (WW, XS)),
    "raw write loop": (write_loop, (XS,)),
    "raw write loop gradient": (write_loop_grad, (XS,)),
    "raw read loop": (read_loop, (XS, np.int32(0))),
    "raw dynamic_size decoder": (decoder, (XS[0], np.int32(4))),
    "TensorArray dynamic_size decoder": (ta_decoder, (XS[0], np.int32(4))),
}


def _functions(mlir: str) -> dict[str, str]:
    """Each ``func.func`` of the module by name, as text."""
    starts = [(m.start(), m.group(1)) for m in re.finditer(r"func\.func (?:public |private )?@([\w.$-]+)", mlir)]
    return {name: mlir[a:b] for (a, name), (b, _) in zip(starts, [*starts[1:], (len(mlir), "")], strict=True)}


def _while_bodies(mlir: str) -> list[str]:
    """The text of every ``stablehlo.while`` (cond and body regions), with the text of every
    function they call, transitively (JAX lowers a loop body's pieces as ``func.call``s)."""
    functions, found, start = _functions(mlir), [], 0
    while (k := mlir.find("stablehlo.while", start)) >= 0:
        depth, j = 0, mlir.index("{", k)
        while True:  # to the end of the ``do`` region: braces balance and no region follows
            closing = mlir[j] == "}"
            depth += {"{": 1, "}": -1}.get(mlir[j], 0)
            j += 1
            if closing and depth == 0 and not mlir[j:].lstrip().startswith("do"):
                break
        text, todo, seen = mlir[k:j], re.findall(r"func\.call @([\w.$-]+)", mlir[k:j]), set()
        while todo:
            name = todo.pop()
            if name not in seen and name in functions:
                seen.add(name)
                text += functions[name]
                todo += re.findall(r"func\.call @([\w.$-]+)", functions[name])
        found.append(text)
        start = j
    return found


def _conditionals(mlir: str) -> int:
    return sum(body.count("stablehlo.case") + body.count("stablehlo.if") for body in _while_bodies(mlir))


def _export(fn, args, platform):
    return jax.export.export(jax.jit(jta.checkify(fn)), platforms=[platform])(*args)


@pytest.mark.rotate("platform")  # each program for one platform by default, rotating; all under --long
@pytest.mark.parametrize("platform", ["cpu", "cuda", "tpu"])
@pytest.mark.parametrize("name", list(PROGRAMS))
def test_checkified_program_exports_without_callbacks_or_check_conditionals_in_loops(name, platform):
    fn, args = PROGRAMS[name]
    mlir = _export(fn, args, platform).mlir_module()
    assert not CALLBACKS.search(mlir), "a host callback in the exported module"
    assert _while_bodies(mlir), "no loop in the exported module"
    if name.startswith("W"):  # the same program without checks has the same loop conditionals
        unchecked = jax.export.export(jax.jit(functools.partial(fn, checks=False)), platforms=[platform])(*args)
        assert _conditionals(mlir) == _conditionals(unchecked.mlir_module())
    if "gradient" not in name:  # (a differentiated read lowers through lax.platform_dependent)
        assert _conditionals(mlir) == 0, "a conditional in a loop body"


@pytest.mark.parametrize("name", list(PROGRAMS))
def test_deserialized_cpu_export_computes_the_same_values(name):
    fn, args = PROGRAMS[name]
    def values(*a):  # plain arrays only; flows differ by design (each new array's is distinct)
        return [x for path, x in jax.tree_util.tree_leaves_with_path(fn(*a))
                if "flow" not in jax.tree_util.keystr(path)]
    restored = jax.export.deserialize(_export(values, args, "cpu").serialize())
    errors, got = restored.call(*args)
    assert errors.exception is None
    for g, want in zip(got, values(*args), strict=True):
        np.testing.assert_array_equal(np.asarray(g), np.asarray(want))


def w2_shifted(W, xs, shift):
    ta = jta.TensorArray(jnp.float32, size=T, element_shape=(D,)).unstack(xs)
    return jax.lax.scan(lambda h, t: (jnp.tanh(h @ W + ta.read(t + shift)), None), jnp.zeros(D), jnp.arange(T))[0]


@pytest.mark.parametrize("fn, args, text", [
    (w2_shifted, (WW, XS, np.int32(2)), "Tried to read from index 6 but array size is: 6"),
    (read_loop, (XS, np.int32(3)), "Tried to read from index 6 but array size is: 6"),
    (decoder, (XS[0], np.int32(9)), "beyond the static capacity 6"),
    (ta_decoder, (XS[0], np.int32(9)), "beyond the static capacity 6"),
], ids=["TensorArray read loop, array not returned", "raw read loop", "raw dynamic_size decoder",
        "TensorArray dynamic_size decoder"])
def test_errors_recorded_in_an_exported_function_surface_from_its_error_record(fn, args, text):
    def value(*a):  # the array or raw-op state is not returned
        out = fn(*a)
        return out[1] if isinstance(out, tuple) else out
    restored = jax.export.deserialize(_export(value, args, "cpu").serialize())
    errors, _ = restored.call(*args)
    with pytest.raises(jta.errors.InvalidArgumentError, match=re.escape(text)):
        jta.throw(errors)


def test_the_checks_above_see_a_conditional_and_a_callback():
    """The assertions can fail: a ``lax.cond`` in a scan body is found in the loop, and a
    ``jta.TensorArray.read`` in compiled code that is not checkified (a host-callback check)
    cannot be exported."""
    def with_cond(xs):
        return jax.lax.scan(lambda c, x: (jax.lax.cond(x[0] > 0, jnp.sin, jnp.cos, c), None), jnp.zeros(D), xs)[0]
    mlir = jax.export.export(jax.jit(with_cond), platforms=["cpu"])(XS).mlir_module()
    assert _conditionals(mlir) == 1

    with pytest.raises(jta.errors.UnimplementedError, match=re.escape("Export jax.jit(jta.checkify(f)) instead")):
        jax.export.export(jax.jit(w2), platforms=["cpu"])(WW, XS)  # (its read would check through a callback)


@pytest.mark.parametrize("reverse", [False, True])
def test_a_checkified_scan_over_a_symbolic_length_exports(reverse):
    """A scan whose length is a symbolic dimension (jax.export.symbolic_shape): the checkified
    program exports as the unchecked one does, and its record reports the error of each size."""
    def f(xs, i):
        ta = jta.TensorArray(jnp.float32, size=4, element_shape=()).unstack(jnp.arange(4.0))
        body = lambda c, x: (c + ta.read(i) * x, x * 2)  # noqa: E731
        return jax.lax.scan(body, 0.0, xs, reverse=reverse)

    b, = jax.export.symbolic_shape("b")
    spec = (jax.ShapeDtypeStruct((b,), jnp.float32), jax.ShapeDtypeStruct((), jnp.int32))
    exported = jax.export.deserialize(jax.export.export(jax.jit(jta.checkify(f)))(*spec).serialize())
    for n in (2, 5):
        errors, (total, ys) = exported.call(jnp.ones(n), np.int32(3))
        assert errors.exception is None and float(total) == 3.0 * n and ys.shape == (n,)
        errors, _ = exported.call(jnp.ones(n), np.int32(6))
        assert str(errors.exception) == "Tried to read from index 6 but array size is: 4"
