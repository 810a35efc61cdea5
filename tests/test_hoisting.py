"""A scan's bookkeeping decided after the loop (``jta._delivery.hoisting``): the same first error
as the eager program, in every compiled mode, and moved only when nothing in the step needs it.

Each program fails (or not) at a step chosen by its argument, so the first error depends on the
order of steps, of ops within a step and of arrays; each runs eagerly (the reference), under
``jax.jit(jta.checkify(f))``, as ``jta.checked(f)`` and exported and deserialized."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax

import jta
from jta import raw_ops as ops
from jta._delivery import hoisting
from tests.helpers import budget


def loop_writes(bad):
    """``fori_loop`` (a scan with a counter): the index comes from the counter."""
    ta = jta.TensorArray(jnp.float32, size=5, element_shape=())
    return lax.fori_loop(0, 5, lambda i, ta: ta.write(jnp.where(i == bad, 0, i), 1.0), ta).stack()


def reversed_writes(bad):
    ta = jta.TensorArray(jnp.float32, size=5, element_shape=())
    step = lambda ta, t: (ta.write(jnp.where(t == bad, 4, t), 1.0), None)  # noqa: E731
    return lax.scan(step, ta, jnp.arange(5), reverse=True)[0].stack()


def read_after_write(bad):
    """W3: step ``t`` reads slot ``t - 1`` and writes slot ``t`` (unrolled by 2); ``bad`` picks a
    step that writes slot 1 again (``bad % 10``) or reads past the end (``bad // 10``)."""
    ta = jta.TensorArray(jnp.float32, size=6, element_shape=(), clear_after_read=False).write(0, 1.0)

    def step(ta, t):
        v = ta.read(jnp.where(t == bad // 10, 9, t - 1))
        return ta.write(jnp.where(t == bad % 10, 1, t), 2 * v), None

    return lax.scan(step, ta, jnp.arange(1, 6), unroll=2)[0].stack()


def two_arrays(bad):
    """Two carried arrays and a closed-over one, indices from the scanned input and a constant."""
    src = jta.TensorArray(jnp.float32, size=4, element_shape=()).unstack(jnp.arange(4.0))

    def step(c, t):
        a, b = c
        x = src.read(jnp.where(t == bad // 10, 8, t))
        return (a.write(jnp.where(t == bad % 10, 0, t), x), b.write(3 - t, -x)), None

    a, b = lax.scan(step, (jta.TensorArray(jnp.float32, size=4, element_shape=()),
                           jta.TensorArray(jnp.float32, size=4, element_shape=())), jnp.arange(4))[0]
    return a.stack() + b.stack()


def raw_reads(bad):
    """Raw ops: reads clear their slot, so reading it again is an error."""
    state, handle, flow = ops.TensorArrayV3(ops.new_state(), 4, jnp.float32, element_shape=())
    state, flow = ops.TensorArrayScatterV3(state, handle, jnp.arange(4), jnp.arange(4.0), flow)

    def step(c, t):
        state, total = c
        state, x = ops.TensorArrayReadV3(state, handle, jnp.where(t == bad, 0, t), flow, jnp.float32)
        return (state, total + x), None

    (state, total), _ = lax.scan(step, (state, jnp.float32(0)), jnp.arange(4))
    jta.throw(state)
    return total


PROGRAMS = {
    loop_writes: [0, 2, 4, 9],
    reversed_writes: [0, 1, 3, 9],
    read_after_write: [3, 20, 42, 24, 99, 31],
    two_arrays: [2, 20, 12, 21, 99],
    raw_reads: [1, 3, 9],
}
CASES = [(f, bad) for f, bads in PROGRAMS.items() for bad in bads]


def eager(f, bad):
    with jax.disable_jit():
        try:
            return np.asarray(f(bad)), None
        except jta.errors.TensorArrayError as e:
            return None, (type(e), str(e))


def compiled(f, bad, mode):
    if mode == "checked":
        try:
            return np.asarray(jta.checked(f)(bad)), None
        except jta.errors.TensorArrayError as e:
            return None, (type(e), str(e))
    checked = jax.jit(jta.checkify(f))
    if mode == "export":
        exported = jax.export.deserialize(jax.export.export(checked)(bad).serialize())
        record, out = exported.call(bad)
    else:
        record, out = checked(bad)
    exc = record.exception
    return (np.asarray(out), None) if exc is None else (None, (type(exc), str(exc)))


def _case_modes() -> list:
    """Every case in every mode under ``--long``; by default each case in one mode, in rotation."""
    modes = ["checkify", "checked", "export"]
    return [pytest.param(case, mode, id=f"{case[0].__name__}-{case[1]}-{mode}" if isinstance(case, tuple) else f"{case}-{mode}",
                         marks=() if j == k % len(modes) else pytest.mark.long_only)
            for k, case in enumerate(CASES) for j, mode in enumerate(modes)]


@pytest.mark.parametrize(("case", "mode"), _case_modes())
def test_the_first_error_is_the_eager_one(case, mode, monkeypatch):
    f, bad = case
    plans = []
    original = hoisting.plan
    monkeypatch.setattr(hoisting, "plan", lambda *a: plans.append(original(*a)) or plans[-1])
    want_value, want_error = eager(f, bad)
    value, error = compiled(f, bad, mode)
    assert error == want_error
    if want_error is None:
        np.testing.assert_array_equal(value, want_value)
    if mode != "export":  # (export traces once per platform)
        assert plans and all(p is not None for p in plans), "the loop's bookkeeping stayed in the loop"


def test_stays_in_the_loop_when_an_index_depends_on_the_carry(monkeypatch):
    """An index the step computes from its carry is known only in the step: nothing moves, and
    the error is still the eager one."""
    plans = []
    original = hoisting.plan
    monkeypatch.setattr(hoisting, "plan", lambda *a: plans.append(original(*a)) or plans[-1])

    def f(bad):
        def step(c, t):
            ta, j = c
            return (ta.write(j, 1.0), jnp.where(t == bad, j, j + 1)), None

        ta = jta.TensorArray(jnp.float32, size=4, element_shape=())
        return lax.scan(step, (ta, 0), jnp.arange(4))[0][0].stack()

    record, _ = jax.jit(jta.checkify(f))(1)
    assert "index 1 because it has already been written" in str(record.exception)
    assert plans == [None]


def test_under_x64_an_index_past_int32_is_reported_as_given():
    with jax.enable_x64(True):
        def f(bad):
            ta = jta.TensorArray(jnp.float32, size=3, element_shape=())
            step = lambda ta, t: (ta.write(jnp.where(t == 1, bad, t), 1.0), None)  # noqa: E731
            return lax.scan(step, ta, jnp.arange(3, dtype=jnp.int64))[0].stack()

        record, _ = jax.jit(jta.checkify(f))(jnp.int64(2**33 + 1))
        assert str(2**33 + 1) in str(record.exception)


@pytest.mark.parametrize("mode", ["checkify", "checked", "export"])
@pytest.mark.parametrize("case", CASES, ids=[f"{f.__name__}-{bad}" for f, bad in CASES])
def test_known_while_tracing_the_decision_is_made_then(case, mode, monkeypatch):
    """The same programs with ``bad`` a Python int: every index is known while tracing, so the
    decision after each loop is made in NumPy then (``hoisting.decide_known``), and the first
    error (class and text) is still the eager one: the program holds it as a constant."""
    f, bad = case
    made = []
    original = hoisting.decide_known
    monkeypatch.setattr(hoisting, "decide_known", lambda *a, **k: made.append(original(*a, **k)) or made[-1])
    g = lambda dummy: f(bad)  # noqa: E731
    want_value, want_error = eager(g, 0)
    value, error = compiled(g, 0, mode)
    assert error == want_error
    if want_error is None:
        np.testing.assert_array_equal(value, want_value)
    assert made and all(m is not None for m in made), "the decision was staged"


def test_known_replay_is_replay():
    """``slots.replay`` in NumPy (a decision made while tracing) is the staged one, on random
    flags, slots (in range or not) and ops."""
    from jta._records import slots

    rng = np.random.default_rng(0)
    for _ in range(budget.scaled(10, 200)):
        n, steps, per_step = int(rng.integers(1, 6)), int(rng.integers(1, 7)), int(rng.integers(1, 4))
        flags = rng.choice(np.arange(32, dtype=np.int32), n)
        where = rng.integers(-1, n + 2, (steps, per_step)).astype(np.int32)
        kinds = tuple(str(k) for k in rng.choice(slots.OPS, per_step))
        staged = jax.jit(lambda f, s, kinds=kinds: slots.replay(f, s, kinds))(flags, where)
        known = slots.replay(flags, where, kinds, xp=np)
        for a, b in zip(staged, known, strict=True):
            np.testing.assert_array_equal(np.asarray(a), b)
            assert np.asarray(a).dtype == b.dtype
