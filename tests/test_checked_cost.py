"""What ``jta.checked`` costs per call, counted rather than timed (``benchmarks/checked_overhead.py``).

On XLA:CPU each kernel outside the loop and each output of the program is time on every call
(about 1 µs and 7 µs), and so is jta's Python work. These tests pin the deterministic measures:

* the decision after a loop whose indices are not known while tracing (the staged path) is a
  few kernels: one scatter of the slot replay, and one reduction per record that carries the
  entry along (``hoisting.first_where``), not an ``argmax`` and a pick per record and report;
* a record that the decisions made while tracing found empty is no output of the program, not
  fetched, also through a ``jit`` inside (``jta.checked(jax.jit(f))``);
* one host transfer per call on the staged path, none on the known one, and no Python work
  that grows with the program: on a call without error, no Python function of jta's but the
  wrapper;
* and the errors stay those of ``jta.checked(f)``: same first error, same class and text.
"""

from __future__ import annotations

import cProfile
import os
import pstats
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jta
from benchmarks import checked_overhead as overhead
from jta._delivery import api
from tests.helpers import xla

T = 10


@pytest.fixture(scope="module")
def data() -> tuple[jax.Array, jax.Array]:
    return overhead.make_inputs(T, batch=None)


def test_the_staged_decision_is_a_few_kernels(data):
    W, xs = data
    args = (W, xs, jnp.int32(0))
    nochecks = overhead.hlo_counts(jax.jit(lambda W, xs, o: overhead.staged(W, xs, o, checks=False)), args,
                                   xla.DEFAULT_OPTIONS)
    checked = overhead.hlo_counts(overhead.program_of(_called(jta.checked(overhead.staged), args)), args,
                                  xla.DEFAULT_OPTIONS)
    # Measured (jax 0.10.2, XLA:CPU): 7 more than checks=False (the index and its bounds check,
    # the replay's scatter and its operand, the reduction, the record); 13 before the decision
    # carried its entries through one reduction (and the replay's keys were computed per call).
    assert checked["entry_kernels"] - nochecks["entry_kernels"] <= 7, (checked, nochecks)
    assert checked["outputs"] == nochecks["outputs"] + 1  # the record: fetched once per call


@pytest.mark.parametrize("through_jit", [False, True])
def test_a_record_known_empty_is_no_output(data, through_jit):
    W, xs = data
    args = (W, xs, jnp.int32(0))
    f = jax.jit(overhead.known) if through_jit else overhead.known
    checked = overhead.hlo_counts(overhead.program_of(_called(jta.checked(f), args)), args, xla.DEFAULT_OPTIONS)
    native = overhead.hlo_counts(jax.jit(overhead.native), args, xla.DEFAULT_OPTIONS)
    assert checked["outputs"] == native["outputs"] == 1


def test_transfers_per_call(data):
    W, xs = data
    args = (W, xs, jnp.int32(0))
    staged = _called(jta.checked(overhead.staged), args)
    known = _called(jta.checked(jax.jit(overhead.known)), args)
    assert overhead.calls_per_call(lambda: staged(*args), overhead.TRANSFERS, n=20) == 1
    assert overhead.calls_per_call(lambda: known(*args), overhead.TRANSFERS, n=20) == 0
    # jta's Python work per call, whatever the program, counted with the lambda: the wrapper, a
    # test of the arguments' types, and on the staged path the record's unpacking and its
    # conversion (measured: 5 and 3; 13 and 8 before the fast path, 35 before that).
    assert overhead.calls_per_call(lambda: staged(*args), n=20) <= 6
    assert overhead.calls_per_call(lambda: known(*args), n=20) <= 4


@pytest.mark.parametrize("form", ["staged", "known"])
def test_a_call_without_error_runs_no_other_python_of_jta(data, form):
    """The common call is the wrapper alone: no pytree node of jta's is unflattened (the record
    comes out of ``jax.jit`` as a dict keyed by its site table), no helper is called."""
    W, xs = data
    args = (W, xs, jnp.int32(0))
    f = overhead.staged if form == "staged" else jax.jit(overhead.known)
    checked = _called(jta.checked(f), args)
    checked(*args)
    prof = cProfile.Profile()
    prof.enable()
    for _ in range(5):
        checked(*args)
    prof.disable()
    package = os.path.dirname(jta.__file__) + os.sep
    ran = {(fn, s[1]) for (path, _, fn), s in pstats.Stats(prof).stats.items()  # type: ignore[attr-defined]
           if path.startswith(package)}
    assert ran == {("wrapper", 5)}, ran


@pytest.mark.parametrize("offset", [3, -1, 0])
def test_the_same_errors_through_a_jit(data, offset):
    W, xs = data
    plain = _outcome(jta.checked(overhead.staged), W, xs, jnp.int32(offset))
    jitted = _outcome(jta.checked(jax.jit(overhead.staged)), W, xs, jnp.int32(offset))
    checkified = _outcome(lambda *a: jax.jit(jta.checkify(overhead.staged))(*a)[0].throw(), W, xs,
                          jnp.int32(offset))
    assert plain[0] == jitted[0] == checkified[0]
    assert (plain[0] is None) == (offset == 0)
    if offset == 0:
        np.testing.assert_array_equal(plain[1], jitted[1])


def test_a_jit_inside_keeps_its_own_errors():
    """A record found empty through a ``jit`` changes nothing else: what the ``jit`` refuses (an
    output that is not a JAX type) it still refuses, with JAX's message."""
    def returns_an_object(x: Any) -> Any:
        return object()

    got = _outcome(jta.checked(jax.jit(returns_an_object)), jnp.ones(()))
    assert got[0] is not None and got[0][0] == "TypeError" and "traced for jit" in got[0][1], got


def test_arguments_pass_as_given():
    arrays = (jnp.ones(2), 1.5, [jnp.int32(3)], None)
    assert api._as_given(arrays, {}, (), ())[0] is arrays  # nothing to wrap: the same tuple
    args, _ = api._as_given((True, np.bool_(False), 7), {"k": True}, (), ())
    assert args[0] == 1 and args[0].dtype == np.int32 and args[1] == 0 and args[2] == 7


def _called(checked: Any, args: tuple[Any, ...]) -> Any:
    jax.block_until_ready(checked(*args))  # compiled
    return checked


def _outcome(f: Any, *args: Any) -> tuple[Any, Any]:
    try:
        out = f(*args)
    except Exception as exc:  # noqa: BLE001  (the outcome compared is the exception)
        return (type(exc).__name__, str(exc)), None
    return None, np.asarray(out) if isinstance(out, jax.Array) else None
