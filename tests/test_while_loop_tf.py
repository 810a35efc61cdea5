"""``jta.while_loop`` against TensorFlow's ``tf.while_loop`` on generated programs.

``tf.while_loop(..., maximum_iterations=B)`` with ``tf.TensorArray``s among its loop variables is
what ``jta.while_loop`` reimplements, and TF2 eager under a ``tf.GradientTape`` is its reference:
the loop runs step by step in Python, so its values and gradients are those of the steps it ran.
Each program (``tests/helpers/while_programs.py``: one description, written once in TF and once in
jta) runs on both; they must agree on the step count, the size and rows of every output array,
the final state, the loss and its gradient in every float argument (float32, relative tolerance
1e-5). Data-dependent exits are generated with a margin, so float32 rounding cannot move them.

What TF does is checked on TF's side first (TF wins): the planned step count; reaching
``maximum_iterations`` stops the loop silently with exactly that many elements written (one per
step; per inner step when nested); a loop of no step stacks an empty ``(0, d)`` array, and its
gradient is the identity in the initial state and zero in everything else.

Families (``while_programs.FAMILIES``): ``exit`` (a tanh RNN cell that runs while ``sum(h * h)``
exceeds a threshold, reading its inputs from an array the body closes over; weights, inputs and
initial state differentiated), ``grow`` (two growing arrays written every step of a counted loop,
``jta.fori_loop`` with a traced bound by default, also ``jta.while_loop`` in the long runs),
``read_after_write`` (each step reads back the element written ``lag`` steps earlier),
``nested`` (a ``jta.while_loop`` in the body of another, its condition closing over the outer
step's count, both writing one array), ``zero_trip``, ``bound`` (the bound stops the loop with
the condition still true, the condition turns false exactly at the bound, or one step before)
and ``batch`` (``jax.vmap`` over members of different step counts, each compared with TF run on
it alone, and the gradient of the batch's total, the sum of TF's in the shared weights).

The jta runs (:func:`modes`): under ``jax.jit`` the plain loop (value) and, separately, the loop
of ``jax.value_and_grad`` (a different loop in jta: it records residuals for the backward loop),
plus the gradient in the initial state alone (the weights then are constants of the loop, with
symbolic-zero tangents); under ``jta.checked``, the same with every TensorArray check on; and
eagerly. The loss sums ``stack_padded()`` (zeros past the size), so it works with the traced size
of a growing array; ``stack()`` of every array returned is compared with TF's stack, shape included.

Counts: 3 programs per family by default, each kind in one shape, so the jitted functions are
compiled once per kind and shared (compiling is most of the cost: about 25 s on one core); every
program runs under ``jit``, the unbatched ones under ``checked``, the first of each single-kind
family eagerly, and the batches are all of the nested kind. Under ``pytest --long``: 60 per family
in random shapes (widths 1-3, bounds 0-5, capacities with and without slack, fixed-size arrays,
lags 0-2, carried or closed-over inner counts), batches of every kind, every program under
``checked`` and every 4th eagerly (about 10 minutes). A failure prints the program and every
difference found.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jta
from tests.helpers import budget, while_programs

tf = pytest.importorskip("tensorflow")

SEED = 0
N_PROGRAMS = budget.scaled(1, 60)
N_BOUND = budget.scaled(3, 60)  # 3: every exit of the bound family
LONG = budget.long_run()  # also: random shapes (more compilations), more runs per program
RTOL = 1e-5
ATOL = 1e-6  # relative to the largest magnitude compared (gradients sum a few float32 terms)


# -- the jta runs -------------------------------------------------------------------------------

@functools.cache
def jta_runs(shape: while_programs.Shape, batched: bool) -> dict:
    """How a program of ``shape`` runs on jta: ``{"eager", "jit", "checked"}``, each a function
    ``(floats, ints) -> {part: result}``. The parts: ``value`` (``(loss, aux)``: the plain loop)
    and ``value and grad`` (``((loss, aux), grads)`` in every float argument: the loop that
    records residuals, then the backward loop); under ``jit`` and ``checked`` also the gradient in
    the initial state alone (the weights then are constants of the loop, with symbolic-zero
    tangents), a batch's instead the gradient of its total. The parts are one jitted function,
    made once per shape (compiling is most of this test's time): programs of a shape share it."""
    f = while_programs.jta_program(shape)
    vg = jax.value_and_grad(f, has_aux=True)
    if not batched:
        state = while_programs.STATE_KEY[shape.kind]

        def loss_of_state(x, fl, it):
            return f(dict(fl, **{state: x}), it)[0]

        def eager(fl, it):
            return {"value": f(fl, it), "value and grad": vg(fl, it)}

        def parts(fl, it):
            return dict(eager(fl, it), **{f"grad in {state} alone": jax.grad(loss_of_state)(fl[state], fl, it)})
    else:  # every member's own value and gradient, and the gradient of the batch's total
        def eager(fl, it):
            axes = (while_programs.member_axes(shape, fl), while_programs.member_axes(shape, it))
            return {"value": jax.vmap(f, in_axes=axes)(fl, it), "value and grad": jax.vmap(vg, in_axes=axes)(fl, it)}

        def parts(fl, it):
            axes = (while_programs.member_axes(shape, fl), while_programs.member_axes(shape, it))
            return dict(eager(fl, it), **{"grad of total": jax.value_and_grad(_total(f, axes), has_aux=True)(fl, it)})
    return {"eager": eager, "jit": jax.jit(parts), "checked": jta.checked(parts)}


def _total(f, axes):
    def total(fl, it):
        losses, aux = jax.vmap(f, in_axes=axes)(fl, it)
        return jnp.sum(losses), aux
    return total


# -- comparison ---------------------------------------------------------------------------------

def _close(got, want, what: str, diffs: list[str]) -> None:
    got, want = np.asarray(got), np.asarray(want)
    if got.shape != want.shape:
        diffs.append(f"{what}: shape {got.shape}, TF {want.shape}")
        return
    scale = max(1.0, float(np.max(np.abs(want), initial=0.0)))
    if not np.allclose(got, want, rtol=RTOL, atol=ATOL * scale):
        err = float(np.max(np.abs(got - want)))
        diffs.append(f"{what}: max abs diff {err:.3g}\n      jta {got.tolist()}\n      TF  {want.tolist()}")


def expected_rows(program: while_programs.Program, m: int) -> list[int]:
    """The rows TF must stack (its semantics, checked): one per step (nested: per inner step);
    a fixed-size array stacks all its slots."""
    s, trips, data = program.shape, program.trips[m], program.data[m]
    if s.kind == "nested":
        return [int(sum(min(int(k), s.inner) for k in data["ms"][:trips]))]
    if s.kind == "raw" and s.fixed:
        return [s.bound]
    return [trips, trips] if s.kind == "grow" else [trips]


def check_tf(program: while_programs.Program, m: int, ref: dict) -> list[str]:
    """TF's own semantics: the planned step count, exactly one element per step."""
    diffs = []
    if ref["trips"] != program.trips[m]:
        diffs.append(f"TF ran {ref['trips']} steps, planned {program.trips[m]}")
    rows = [s.shape[0] for s in ref["stacks"]]
    if rows != expected_rows(program, m):
        diffs.append(f"TF stacked {rows} rows, expected {expected_rows(program, m)}")
    if ref["trips"] == 0:  # loss = sum(h0 * v) (+ zero rows): the identity in the state, nothing else
        state, data = while_programs.STATE_KEY[program.shape.kind], program.data[m]
        want = {k: (data["v"] if k == state else data[state] if k == "v" else np.zeros_like(g))
                for k, g in ref["grads"].items()}
        if not (np.array_equal(ref["h"], data[state]) and all(np.array_equal(ref["grads"][k], w) for k, w in want.items())):
            diffs.append(f"TF's loop of no step is not the identity: {ref}")
    return diffs


def compare(ref: dict, got, grads, label: str, member=None) -> list[str]:
    """jta's ``(loss, aux)`` and ``grads`` (``member``: of a batch) against TF's ``ref``."""
    (loss, aux) = got
    pick = (lambda x: x) if member is None else (lambda x: np.asarray(x)[member])  # noqa: E731
    diffs: list[str] = []
    if int(pick(aux["trips"])) != ref["trips"]:
        diffs.append(f"{label}: steps {int(pick(aux['trips']))}, TF {ref['trips']}")
    for k, (ta, stack) in enumerate(zip(aux["arrays"], ref["stacks"], strict=True)):
        values, size = (np.asarray(pick(x)) for x in aux["padded"][k])
        rows = stack.shape[0]
        if int(size) != rows:
            diffs.append(f"{label}: array {k} size {int(size)}, TF {rows}")
            continue
        _close(values[:rows], stack, f"{label}: array {k} rows", diffs)
        if values[rows:].any():
            diffs.append(f"{label}: array {k} stack_padded rows past the size are not zero")
        if member is None:  # outside jit the size is concrete: stack() has TF's shape, (0, d) included
            try:
                _close(ta.stack(), stack, f"{label}: array {k} stack()", diffs)
            except Exception as e:
                diffs.append(f"{label}: array {k} stack() raised {type(e).__name__}: {e}")
    _close(pick(aux["h"]), ref["h"], f"{label}: final state", diffs)
    _close(pick(loss), ref["loss"], f"{label}: loss", diffs)
    if grads is not None:
        for name, g in ref["grads"].items():
            _close(pick(grads[name]), g, f"{label}: d loss / d {name}", diffs)
    return diffs


# -- the tests ----------------------------------------------------------------------------------

def run_program(program: while_programs.Program, modes: tuple[str, ...]) -> list[str]:
    """Every jta run of ``program`` in ``modes`` against TF; the differences found."""
    refs = [while_programs.tf_run(program.shape, data) for data in program.data]
    diffs = [d for m, ref in enumerate(refs) for d in check_tf(program, m, ref)]
    args = while_programs.stack_members(program) if program.batched else program.data[0]
    fl, it = while_programs.split(while_programs.to_jax(args))
    runs = jta_runs(program.shape, program.batched)
    for mode in modes:
        try:
            parts = runs[mode](fl, it)
        except Exception as e:  # a crash is a difference too: reported with the others
            diffs.append(f"{mode}: raised {type(e).__name__}: {str(e)[:2000]}")
            continue
        for part, result in parts.items():
            label = f"{mode}, {part}"
            if part.endswith("alone"):
                state = while_programs.STATE_KEY[program.shape.kind]
                _close(result, refs[0]["grads"][state], f"{label}: d loss / d {state}", diffs)
                continue
            got, grads = (result, None) if part == "value" else result
            if part == "grad of total":
                diffs += _compare_total(program, refs, got, grads, label)
            elif program.batched:
                for m, ref in enumerate(refs):
                    diffs += compare(ref, got, grads, f"{label}, member {m}", member=m)
            else:
                diffs += compare(refs[0], got, grads, label)
    return diffs


def _compare_total(program: while_programs.Program, refs: list[dict], got, grads, label: str) -> list[str]:
    """The gradient of the batch's total: TF's per-member gradients, summed over the members in
    the shared arguments."""
    diffs: list[str] = []
    _close(got[0], sum(r["loss"] for r in refs), f"{label}: total loss", diffs)
    member_keys = while_programs.MEMBER_KEYS[program.shape.kind]
    for name in refs[0]["grads"]:
        want = [r["grads"][name] for r in refs]
        want = np.stack(want) if name in member_keys else np.sum(want, axis=0)
        _close(grads[name], want, f"{label}: d total / d {name}", diffs)
    return diffs


def modes(program: while_programs.Program) -> tuple[str, ...]:
    """The jta runs of a program. Compiling is most of the cost, and eager runs compile every
    loop anew: by default every program runs under ``jit``, the unbatched ones also under
    ``checked`` (one compilation per shape), and the first program of each single-kind family
    eagerly; under ``--long`` every program runs under ``checked`` and every 4th eagerly."""
    out = ["jit"]
    if LONG or not program.batched:
        out.append("checked")
    if program.index % 4 == 0 and (LONG or program.family in ("exit", "grow", "read_after_write", "nested")):
        out.append("eager")
    return tuple(out)


def _cases():
    return [pytest.param(family, k, id=f"{family}-{k}") for family in while_programs.FAMILIES
            for k in range(N_BOUND if family == "bound" else N_PROGRAMS)]


@pytest.mark.long
@pytest.mark.parametrize("family, index", _cases())
def test_program_against_tf(family, index):
    program = while_programs.generate(family, index, SEED, vary=LONG)
    diffs = run_program(program, modes(program))
    assert not diffs, f"{program}\n" + "\n".join(diffs)


# -- regressions ------------------------------------------------------------------------------
# A loop inside the step of another closing over an integer (or a TensorArray, whose sizes and
# slot states are integers) of that step: jta.while_loop used jax.closure_convert, which hoists
# only inexact tracers, so jax.grad raised UnexpectedTracerError (the primal was right). Found
# here (the nested family, whose inner condition reads the outer step's ms[i]) and, at the same
# time, by tests/test_while_loop.py; fixed in jta/loops.py (_closure_convert hoists every tracer).
# The nested family covers the integer; this covers an array made in a scan's step.


def _tf_loops_reading_step_arrays(x):
    """TF: three outer steps (a Python loop), each making an array ``(i + 1) * x`` and running
    an inner ``tf.while_loop`` of ``i`` steps that multiplies ``h`` by the array's elements."""
    with tf.GradientTape() as tape:
        x = tf.constant(x)
        tape.watch(x)
        h = x[0]
        for i in range(3):
            ta = tf.TensorArray(tf.float32, size=3, element_shape=()).unstack(x * (i + 1.0))
            _, h = tf.while_loop(lambda j, h, i=i: j < i, lambda j, h, ta=ta: (j + 1, h * ta.read(j)), (0, h),
                                 maximum_iterations=3)
    return h.numpy(), tape.gradient(h, x).numpy()


def _jta_loops_reading_step_arrays(x):
    """jta: the outer steps are a ``lax.fori_loop`` (a scan): ``i`` and the array are tracers of
    the scan's step that the inner loop closes over."""
    def outer(i, h):
        ta = jta.TensorArray(jnp.float32, size=3, element_shape=()).unstack(x * (i + 1.0))
        return jta.while_loop(lambda s: s[0] < i, lambda s: (s[0] + 1, s[1] * ta.read(s[0])), (0, h),
                              maximum_iterations=3)[1]
    return jax.lax.fori_loop(0, 3, outer, x[0])


def test_loop_inside_scan_reads_an_array_of_the_scan_step():
    x = np.array([0.5, 1.5, -2.0], np.float32)
    want_h, want_g = _tf_loops_reading_step_arrays(x)
    h, g = jax.jit(jax.value_and_grad(_jta_loops_reading_step_arrays))(x)
    np.testing.assert_allclose(h, want_h, rtol=RTOL)
    np.testing.assert_allclose(g, want_g, rtol=RTOL)
