"""``jta.while_loop`` and ``jta.fori_loop`` under every JAX transformation, against independent references.

The loops under test run a small tanh cell ``h = tanh(W h + b r)`` whose trip count the data
decides: a halving ``r`` stops it (``r > 1``, exact in float32, so the trip count is computed in
Python for each input), or a traced step count ``n``, or ``maximum_iterations``. Each is compared
with the same cell written with ``lax.scan`` over exactly that trip count (or ``lax.fori_loop``
with static bounds, or a Python loop), in values and in derivatives: ``jax.grad``/``vjp``/
``jacrev``/``linearize`` (which need ``maximum_iterations``), ``jvp``/``jacfwd``, ``hessian``,
reverse over reverse (``grad`` of ``grad``, ``jacrev`` of ``jacrev``, also batched), ``jit``,
``vmap`` (members with different trip counts, each with its own gradient), ``checkpoint``,
``disable_jit`` and ``jax.export`` (serialized, deserialized, called), in the initial carry and
in weights the body closes over. Loops that stop by condition, at
``maximum_iterations`` and after zero steps (gradient: identity in the carry, zero in the weights).

The carry holds tuples and dicts of arrays, integer leaves, ``jta.TensorArray``s (written every
step, read back inside the loop, stacked after it: ``stack_padded`` of a growing one, ``stack`` of
a fixed-size one) and a gradient registry (``jta.gradients``); loops nest in a loop's body and in
a ``lax.scan``. ``jta.checked`` raises TensorFlow's error for a write past a fixed-size array's
end inside the loop (primal and gradient) and returns the reference gradients otherwise;
``jta.checkify`` returns the same as data. ``maximum_iterations`` must be a static, non-negative
int. A float64 gradient matches central finite differences under ``jax.enable_x64``. Finally, the
backward pass costs the steps that ran: every ``while`` of the gradient's program, run by an
evaluator of its jaxpr that counts iterations, runs the data's trip count, not
``maximum_iterations`` (no timing).

What jta does not do yet would be marked ``xfail(strict=True)`` with what happens instead (the
references the same, so a fix turns it into a pass); nothing is at present.

Costs (most of this module's time is XLA compiling): each jta function is jitted once, with the
trip count a traced argument, and called for every case; the references, whose trip counts are
static, are jitted too, all of a test's cases in one program or one compilation per trip count
shared by the tests (eagerly, every op and every scan would be compiled on its own).
"""

from __future__ import annotations

import functools
import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import export, lax
from jax.extend import core as jax_core

import jta
from jta import gradients
from jta.errors import InvalidArgumentError, UnimplementedError
from tests.helpers import assert_close

W = np.float32([[0.5, -0.3], [0.2, 0.4]])  # a contraction: states stay small over the steps
B = np.float32([0.1, -0.2])
X0 = np.float32([0.8, -0.6])
V = np.float32([1.0, -2.0])  # the loss weights (not symmetric, so swapped entries would show)
BOUND = 6  # maximum_iterations of the halving loop
# The halving loop's r0: no step (0.5), stopped by the condition (10: four halvings), by the bound
# (1000 would take ten).
R0S = {"zero-trip": 0.5, "condition": 10.0, "bound": 1000.0}


def halvings(r0: float, bound: int = BOUND) -> int:
    """The halving loop's trip count, in Python (halving a float32 is exact)."""
    trips, r = 0, np.float32(r0)
    while r > 1 and trips < bound:
        r, trips = r * np.float32(0.5), trips + 1
    return trips


def cell(w, h, r):
    return jnp.tanh(w @ h + B * r)


def step(w, carry):
    r, h = carry
    return r * 0.5, cell(w, h, r)


def halving(w, x, r0):
    """The cell while ``r > 1`` (halving ``r``), at most BOUND steps: the final state."""
    _, h = jta.while_loop(lambda c: c[0] > 1.0, lambda c: step(w, c), (r0, x), maximum_iterations=BOUND)
    return h


def halving_ref(w, x, r0, trips):
    (_, h), _ = lax.scan(lambda c, _: (step(w, c), None), (r0, x), None, length=trips)
    return h


def loss(w, x, r0):
    return jnp.sum(V * halving(w, x, r0))


def loss_ref(w, x, r0, trips):
    return jnp.sum(V * halving_ref(w, x, r0, trips))


def counted(w, x, n, bound):
    """``n`` steps of the cell (``n`` traced), at most ``bound``."""
    _, h = jta.while_loop(lambda c: c[0] < n, lambda c: (c[0] + 1, cell(w, c[1], 1.0)), (jnp.int32(0), x),
                          maximum_iterations=bound)
    return h


def counted_ref(w, x, trips):
    return lax.fori_loop(0, trips, lambda i, h: cell(w, h, 1.0), x)  # static bounds: a scan


# Jitted once; r0 (and so the trip count) is traced, so every case reuses the compilation.
grad_halving = jax.jit(jax.grad(loss, argnums=(0, 1, 2)))
jacrev_halving = jax.jit(jax.jacrev(halving, argnums=(0, 1, 2)))
cases = pytest.mark.parametrize("r0", list(R0S.values()), ids=list(R0S))


def static_trips(f):
    """``f`` jitted with its last argument (the trip count) static."""
    return jax.jit(f, static_argnums=f.__code__.co_argcount - 1)


ref_grad = static_trips(lambda w, x, r0, trips: jax.grad(loss_ref, argnums=(0, 1, 2))(w, x, r0, trips))
ref_jacrev = static_trips(lambda w, x, r0, trips: jax.jacrev(halving_ref, argnums=(0, 1, 2))(w, x, r0, trips))


def _ref_grad(r0, x=X0):
    return ref_grad(W, x, np.float32(r0), halvings(r0))


# -- values -------------------------------------------------------------------------------------

def test_value_without_bound_is_lax_while_loop_and_the_bound_stops_it_silently():
    f = jax.jit(lambda x, n: (counted(W, x, n, None), counted(W, x, n, 3)))
    ns = (0, 2, 5)
    refs = jax.jit(lambda x: [(counted_ref(W, x, n), counted_ref(W, x, min(n, 3))) for n in ns])(X0)
    for n, ref in zip(ns, refs, strict=True):
        assert_close(f(X0, n), ref, label=f"n={n}")


# -- reverse mode -------------------------------------------------------------------------------

@cases
def test_grad_in_initial_carry_and_closed_over_weights(r0):
    # W is a traced value the body closes over (jax.grad's argument 0), not a carry leaf.
    assert_close(grad_halving(W, X0, np.float32(r0)), _ref_grad(r0), label=f"{halvings(r0)} steps")


@cases
def test_jacrev_in_carry_and_weights(r0):
    got = jacrev_halving(W, X0, np.float32(r0))
    assert_close(got, ref_jacrev(W, X0, np.float32(r0), halvings(r0)))


def test_zero_trip_gradient_is_identity_in_the_carry_and_zero_in_the_weights():
    d_w, d_x, d_r0 = jacrev_halving(W, X0, np.float32(R0S["zero-trip"]))
    assert_close((d_w, d_x, d_r0), (np.zeros((2, 2, 2)), np.eye(2), np.zeros(2)))


def test_vjp_and_linearize_match_the_reference():
    r0, trips = np.float32(R0S["condition"]), halvings(R0S["condition"])
    ct, t_w, t_x = np.float32([0.3, -1.1]), np.float32([[0.1, 0.2], [-0.3, 0.4]]), np.float32([1.0, 0.5])

    @jax.jit
    def both(w, x):
        out, vjp = jax.vjp(lambda w, x: halving(w, x, r0), w, x)
        _, lin = jax.linearize(lambda w, x: halving(w, x, r0), w, x)
        return out, vjp(ct), lin(t_w, t_x)

    @jax.jit
    def ref(w, x):
        out, vjp = jax.vjp(lambda w, x: halving_ref(w, x, r0, trips), w, x)
        return out, vjp(ct), jax.jvp(lambda w, x: halving_ref(w, x, r0, trips), (w, x), (t_w, t_x))[1]

    assert_close(both(W, X0), ref(W, X0))


def test_jacrev_equals_jacfwd_and_hessian_matches_the_reference():
    r0 = np.float32(R0S["condition"])
    f = lambda x: loss(W, x, r0)  # noqa: E731
    rev, fwd, hess, rev_rev = jax.jit(lambda x: (jax.jacrev(f)(x), jax.jacfwd(f)(x), jax.hessian(f)(x),
                                                 jax.jacrev(jax.jacrev(f))(x)))(X0)
    ref = lambda x: loss_ref(W, x, r0, halvings(r0))  # noqa: E731
    want_grad, want_hess = jax.jit(lambda x: (jax.grad(ref)(x), jax.hessian(ref)(x)))(X0)
    assert_close(rev, fwd)
    assert_close(rev, want_grad)
    assert_close(hess, want_hess, rtol=1e-4, atol=1e-5)
    assert_close(rev_rev, hess, rtol=1e-4, atol=1e-5)  # reverse over reverse, forward over reverse


@pytest.mark.parametrize("how", ["grad", "vjp", "jacrev", "linearize"])
def test_reverse_mode_without_bound_is_refused_traced_and_runs_eagerly(how):
    def f(x):
        return jta.while_loop(lambda c: c[0] > 1.0, lambda c: step(W, c), (np.float32(10.0), x))[1]

    # Traced (under jit) the trip count is unknown; forward mode needs no bound (jax.linearize,
    # jax.vjp's forward half): the transpose raises. Eagerly the loop's length is known first.
    run = {"grad": lambda x: jax.grad(lambda x: jnp.sum(f(x)))(x), "vjp": lambda x: jax.vjp(f, x)[1](x),
           "jacrev": lambda x: jax.jacrev(f)(x),
           "linearize": lambda x: jax.linear_transpose(jax.linearize(f, x)[1], x)(x)}[how]
    with pytest.raises(UnimplementedError, match="pass maximum_iterations"):
        jax.jit(run)(X0)
    bounded = jax.jit(lambda x: jta.while_loop(lambda c: c[0] > 1.0, lambda c: step(W, c), (np.float32(10.0), x),
                                               maximum_iterations=64)[1])
    want = {"grad": lambda: jax.grad(lambda x: jnp.sum(bounded(x)))(X0), "vjp": lambda: jax.vjp(bounded, X0)[1](X0),
            "jacrev": lambda: jax.jacrev(bounded)(X0),
            "linearize": lambda: jax.linear_transpose(jax.linearize(bounded, X0)[1], X0)(X0)}[how]()
    assert_close(run(X0), want)


# -- forward mode -------------------------------------------------------------------------------

def test_jvp_with_a_bound_matches_the_reference():
    r0, trips = np.float32(R0S["bound"]), halvings(R0S["bound"])
    t_w, t_x = np.float32([[0.1, 0.2], [-0.3, 0.4]]), np.float32([1.0, 0.5])
    got = jax.jit(lambda w, x: jax.jvp(lambda w, x: halving(w, x, r0), (w, x), (t_w, t_x)))(W, X0)
    want = jax.jit(lambda w, x: jax.jvp(lambda w, x: halving_ref(w, x, r0, trips), (w, x), (t_w, t_x)))(W, X0)
    assert_close(got, want)


def test_jvp_and_jacfwd_need_no_maximum_iterations():
    r0 = np.float32(R0S["condition"])

    def f(x):  # no maximum_iterations: forward mode, as for lax.while_loop
        return jta.while_loop(lambda c: c[0] > 1.0, lambda c: step(W, c), (r0, x))[1]

    ref = lambda x: halving_ref(W, x, r0, halvings(r0))  # noqa: E731
    t = np.float32([1.0, 0.5])
    assert_close(jax.jvp(f, (X0,), (t,)), jax.jvp(ref, (X0,), (t,)))
    assert_close(jax.jacfwd(f)(X0), jax.jacfwd(ref)(X0))


# -- reverse over reverse -----------------------------------------------------------------------

def grad_of_grad(loss_fn):
    """The gradient in the weights and the carry of a weighted sum of ``loss_fn``'s gradient in
    both (the backward loop differentiated in reverse, in its tangent consts and its carry)."""
    def inner(w, x, *rest):
        d_w, d_x = jax.grad(loss_fn, argnums=(0, 1))(w, x, *rest)
        return jnp.sum(d_w * W) + jnp.sum(V * d_x)
    return jax.grad(inner, argnums=(0, 1))


ref_grad_of_grad = static_trips(grad_of_grad(loss_ref))


def test_grad_of_grad():
    r0 = np.float32(R0S["condition"])
    got = jax.jit(grad_of_grad(loss))(W, X0, r0)
    assert_close(got, ref_grad_of_grad(W, X0, r0, halvings(r0)), rtol=1e-4, atol=1e-5)


def test_grad_of_grad_batched_members_with_their_own_trip_counts():
    # vmap of the second derivative (each member its own), and the second derivative of a vmapped
    # sum (the members' backward loops masked, the shared weights summed over them): grad_of_grad
    # of the sum is the members' summed in the weights, each member's in its carry
    def total(w, xs, r0s):
        return jnp.sum(jax.vmap(loss, in_axes=(None, 0, 0))(w, xs, r0s))

    per_member, (d_w, d_xs) = jax.jit(lambda w, xs, r0s: (
        jax.vmap(grad_of_grad(loss), in_axes=(None, 0, 0))(w, xs, r0s), grad_of_grad(total)(w, xs, r0s)))(
            W, XS, R0_BATCH)
    wants = [ref_grad_of_grad(W, XS[m], r0, halvings(r0)) for m, r0 in enumerate(R0_BATCH)]
    for m, want in enumerate(wants):
        assert_close([g[m] for g in per_member], want, rtol=1e-4, atol=1e-5, label=f"member {m}")
    assert_close(d_w, sum(w for w, _ in wants), rtol=1e-4, atol=1e-5)
    assert_close(d_xs, np.stack([x for _, x in wants]), rtol=1e-4, atol=1e-5)


# -- maximum_iterations -------------------------------------------------------------------------

@pytest.mark.parametrize(("bound", "error", "text"), [
    (-1, ValueError, "maximum_iterations must be >= 0, got -1"),
    (True, TypeError, "maximum_iterations must be a static Python int .* got True"),
    (2.0, TypeError, "maximum_iterations must be a static Python int .* got 2.0"),
])
def test_maximum_iterations_must_be_a_static_non_negative_int(bound, error, text):
    with pytest.raises(error, match=text):
        counted(W, X0, 2, bound)
    with pytest.raises(error, match=text):
        jta.fori_loop(0, jnp.int32(2), lambda i, h: h, X0, maximum_iterations=bound)


def test_traced_maximum_iterations_under_jit_is_refused():
    with pytest.raises(TypeError, match="maximum_iterations must be a static Python int"):
        jax.jit(lambda n: counted(W, X0, 2, n))(3)


def test_numpy_int_and_zero_maximum_iterations():
    # np.int32(2) is as static as 2; maximum_iterations=0 runs no step: the gradient is the identity
    # in the carry, zero in the weights
    f = jax.jit(lambda w, x, n: [jax.jacrev(counted, argnums=(0, 1))(w, x, n, b) for b in (np.int32(2), 0)])
    two, zero = f(W, X0, 5)
    assert_close(two, jax.jit(jax.jacrev(counted_ref, argnums=(0, 1)), static_argnums=2)(W, X0, 2))
    assert_close(zero, (np.zeros((2, 2, 2)), np.eye(2)))


# -- jit, disable_jit, checkpoint, export ------------------------------------------------------

def test_eager_and_disable_jit_gradients_match_the_reference():
    r0 = R0S["condition"]
    assert_close(jax.grad(loss, argnums=(0, 1, 2))(W, X0, np.float32(r0)), _ref_grad(r0))
    with jax.disable_jit():  # every loop runs in Python, op by op
        got = jax.grad(loss, argnums=(0, 1, 2))(W, X0, np.float32(r0))
    assert_close(got, _ref_grad(r0))


def test_disable_jit_runs_a_python_loop_as_lax_while_loop_does():
    """Op by op: the body runs as Python code (only the taken branch of a cond; a nested unbounded
    loop is differentiated too), and maximum_iterations stops it."""
    runs = []

    def body(c):
        runs.append(1)
        inner = jta.while_loop(lambda v: v > 1.0, lambda v: v * 0.5, c[1] + 3.0)
        return c[0] + 1, c[1] * 0.5 + inner * 0.01

    def f(x, bound=None):
        return jta.while_loop(lambda c: c[1] > 1.0, body, (0, x), maximum_iterations=bound)

    with jax.disable_jit():
        n, _ = f(10.0)
        assert len(runs) == n == 4
        assert f(10.0, bound=2)[0] == 2
        got = jax.grad(lambda x: f(x)[1])(10.0)
    assert_close(got, jta.checked(jax.grad(lambda x: f(x)[1]))(10.0))


def test_checkpoint_gradient_matches_the_reference():
    g = jax.jit(jax.grad(jax.checkpoint(loss), argnums=(0, 1, 2)))
    for r0 in (R0S["condition"], R0S["bound"]):
        assert_close(g(W, X0, np.float32(r0)), _ref_grad(r0))


def test_export_round_trip_of_the_gradient():
    exported = export.export(grad_halving)(W, X0, np.float32(1.0))
    restored = export.deserialize(exported.serialize())
    for r0 in R0S.values():  # the trip count is the data's, in the deserialized program too
        assert_close(restored.call(W, X0, np.float32(r0)), _ref_grad(r0))


# -- vmap: members with different trip counts ---------------------------------------------------

XS = np.stack([X0, -X0, X0[::-1]])
R0_BATCH = np.float32(list(R0S.values()))  # 0, 4 and BOUND steps


def test_vmap_of_grad_gives_each_member_its_own_gradient():
    got = jax.jit(jax.vmap(jax.grad(loss, argnums=(0, 1, 2)), in_axes=(None, 0, 0)))(W, XS, R0_BATCH)
    for m, r0 in enumerate(R0_BATCH):  # each member against its own run alone
        member = [g[m] for g in got]
        assert_close(member, _ref_grad(r0, XS[m]), label=f"member {m}")


def test_grad_of_vmapped_sum_sums_the_members_in_the_shared_weights():
    def total(w, xs, r0s):
        return jnp.sum(jax.vmap(loss, in_axes=(None, 0, 0))(w, xs, r0s))

    d_w, d_xs = jax.jit(jax.grad(total, argnums=(0, 1)))(W, XS, R0_BATCH)
    wants = [_ref_grad(r0, XS[m]) for m, r0 in enumerate(R0_BATCH)]
    assert_close(d_w, sum(w for w, _, _ in wants))
    assert_close(d_xs, np.stack([x for _, x, _ in wants]))


# -- what the carry may hold --------------------------------------------------------------------

def _parity_loop(x, n):
    """A dict carry with integer leaves (a counter and a parity that feeds the float leaves)."""
    def body(c):
        a, b = c["h"]
        return {"i": c["i"] + 1, "parity": 1 - c["parity"], "h": (a * 0.5 + c["parity"], jnp.sin(b * a))}
    return jta.while_loop(lambda c: c["i"] < n, body, {"i": jnp.int32(0), "parity": jnp.int32(0), "h": (x, x)},
                          maximum_iterations=5)


def _parity_ref(x, trips):
    def body(i, c):
        a, b = c
        return a * 0.5 + i % 2, jnp.sin(b * a)
    return lax.fori_loop(0, trips, body, (x, x))


def test_integer_leaves_in_the_carry():
    @jax.jit
    def f(x, n):
        out, vjp = jax.vjp(lambda x: _parity_loop(x, n), x)
        ints = np.zeros((), jax.dtypes.float0)  # integer leaves take float0 cotangents
        return out, vjp({"i": ints, "parity": ints, "h": (np.float32(1.0), np.float32(-0.5))})

    ns = (0, 3, 7)  # 7: stopped by maximum_iterations=5

    @jax.jit
    def refs(x):
        return [jax.vjp(lambda x: _parity_ref(x, min(n, 5)), x) for n in ns]  # noqa: B023

    for n, (ref_out, ref_vjp) in zip(ns, refs(np.float32(0.7)), strict=True):
        trips = min(n, 5)
        out, (d_x,) = f(np.float32(0.7), n)
        assert (int(out["i"]), int(out["parity"])) == (trips, trips % 2)
        assert_close(out["h"], ref_out)
        assert_close(d_x, ref_vjp((np.float32(1.0), np.float32(-0.5)))[0])


ROW_WEIGHTS = np.arange(1.0, 9.0, dtype=np.float32).reshape(4, 2)


def _array_loop(w, x, n, array):
    """Each step writes h at i, then reads back the element written the step before (read after
    write: at step 0 the one just written), which feeds the cell; ``n`` steps, at most 4."""
    def body(c):
        i, h, ta = c
        ta = ta.write(i, h)
        return i + 1, cell(w, ta.read(jnp.maximum(i - 1, 0)), 1.0) + 0.5 * h, ta

    _, h, ta = jta.while_loop(lambda c: c[0] < n, body, (jnp.int32(0), x, array), maximum_iterations=4)
    return h, ta


def _array_ref(w, x, trips):
    """The same with a plain (4, 2) buffer carried through a scan of ``trips`` steps."""
    def body(c, i):
        h, buf = c
        buf = buf.at[i].set(h)
        return (cell(w, buf[jnp.maximum(i - 1, 0)], 1.0) + 0.5 * h, buf), None
    (h, buf), _ = lax.scan(body, (x, jnp.zeros((4, 2))), jnp.arange(trips))
    return h, buf


def _array_loss_ref(w, x, trips):
    h, buf = _array_ref(w, x, trips)
    return jnp.sum(buf * ROW_WEIGHTS) + jnp.sum(V * h)


array_ref = static_trips(lambda w, x, trips: jax.value_and_grad(_array_loss_ref, argnums=(0, 1))(w, x, trips))


def _growing(w, x, n):
    ta = jta.TensorArray(jnp.float32, 0, dynamic_size=True, capacity=4, element_shape=(2,))
    h, ta = _array_loop(w, x, n, ta)
    values, size = ta.stack_padded()  # the size is traced: the rows past it are zeros
    return jnp.sum(values * ROW_WEIGHTS) + jnp.sum(V * h), size


def test_growing_tensor_array_written_and_read_in_the_loop_then_stack_padded():
    f = jax.jit(jax.value_and_grad(_growing, argnums=(0, 1), has_aux=True))
    for n in (0, 3, 9):  # 9: stopped by maximum_iterations=4
        trips = min(n, 4)
        (value, size), grads = f(W, X0, n)
        assert int(size) == trips
        assert_close((value, grads), array_ref(W, X0, trips), label=f"{trips} steps")


def _fixed(w, x, n):
    """A fixed-size array of 3: ``n`` = 4 writes past its end (the bound, 4, allows the step)."""
    h, ta = _array_loop(w, x, n, jta.TensorArray(jnp.float32, 3, element_shape=(2,)))
    return jnp.sum(ta.stack() * ROW_WEIGHTS[:3]) + jnp.sum(V * h)


PAST_THE_END = "TensorArray TensorArray: Tried to write to index 3 but array is not resizeable and size is: 3"
checked_fixed_grad = jta.checked(jax.value_and_grad(_fixed, argnums=(0, 1)))


def test_checked_gradient_with_a_fixed_size_tensor_array_matches_the_reference():
    for n in (0, 3):
        # (the reference's fourth row, which the loss of 3 rows leaves out, stays zero for n <= 3)
        assert_close(checked_fixed_grad(W, X0, n), array_ref(W, X0, n), label=f"n={n}")


def test_checked_raises_tf_error_for_a_write_past_the_end_inside_the_loop():
    with pytest.raises(InvalidArgumentError, match=f"^{PAST_THE_END}"):
        jta.checked(_fixed)(W, X0, 4)
    with pytest.raises(InvalidArgumentError, match=f"^{PAST_THE_END}"):
        checked_fixed_grad(W, X0, 4)


def test_checkify_returns_the_error_as_data():
    f = jax.jit(jta.checkify(jax.grad(_fixed, argnums=1)))
    errors, grad = f(W, X0, 3)
    assert errors.exception is None
    assert_close(grad, array_ref(W, X0, 3)[1][1])
    errors, _ = f(W, X0, 4)
    assert isinstance(errors.exception, InvalidArgumentError) and str(errors.exception) == PAST_THE_END


def test_gradient_registry_in_the_carry():
    # Each step adds h into the accumulator of a forward array at row i (read_grad's rule); after
    # the loop, unstack_grad reads the totals back: row i holds the h of step i.
    forward = jta.TensorArray(jnp.float32, 3, element_shape=(2,), tensor_array_name="forward").unstack(
        jnp.zeros((3, 2)))

    def f(x, n):
        registry, _ = gradients.accumulator({}, forward, "gradients")

        def body(c):
            i, h, registry = c
            return i + 1, cell(W, h, 1.0), gradients.read_grad(registry, forward, i, h, "gradients")

        _, h, registry = jta.while_loop(lambda c: c[0] < n, body, (jnp.int32(0), x, registry), maximum_iterations=3)
        _, rows = gradients.unstack_grad(registry, forward, "gradients")
        return jnp.sum(rows * ROW_WEIGHTS[:3]) + jnp.sum(V * h)

    def ref(x, trips):
        hs = [x]
        for _ in range(trips):
            hs.append(cell(W, hs[-1], 1.0))
        rows = jnp.stack(hs[:trips] + [jnp.zeros(2)] * (3 - trips))
        return jnp.sum(rows * ROW_WEIGHTS[:3]) + jnp.sum(V * hs[-1])

    g = jax.jit(jax.value_and_grad(f))
    ns = (0, 2, 5)
    refs = jax.jit(lambda x: [jax.value_and_grad(ref)(x, min(n, 3)) for n in ns])(X0)
    for n, want in zip(ns, refs, strict=True):
        assert_close(g(X0, n), want, label=f"n={n}")


# -- nesting ------------------------------------------------------------------------------------

def _nested_ref(w, x, trips):
    # outer step i runs the inner cell min(i + 1, 2) times, then scales by 0.9
    for i in range(trips):
        x = counted_ref(w, x, min(i + 1, 2)) * 0.9
    return jnp.sum(V * x)


def _nested(w, x, n, inner_closes_over_i):
    def outer(c):
        i, h = c
        if inner_closes_over_i:  # the inner condition closes over the outer body's counter
            h = counted(w, h, i + 1, 2)
        else:  # the inner limit rides in the inner carry
            _, _, h = jta.while_loop(lambda d: d[0] < d[1], lambda d: (d[0] + 1, d[1], cell(w, d[2], 1.0)),
                                     (jnp.int32(0), i + 1, h), maximum_iterations=2)
        return i + 1, h * 0.9

    _, h = jta.while_loop(lambda c: c[0] < n, outer, (jnp.int32(0), x), maximum_iterations=3)
    return jnp.sum(V * h)


# The bug behind the "closure" cases below and test_loop_closing_over_an_int_of_an_enclosing_trace.
@pytest.mark.parametrize("closes_over", [
    pytest.param(False, id="limit-in-carry"),
    pytest.param(True, id="closure"),  # UnexpectedTracerError
])
def test_nested_while_loop_in_a_while_loop_body(closes_over):
    g = jax.jit(jax.grad(_nested, argnums=(0, 1)), static_argnums=3)
    ns = (0, 2, 5)  # 5: the outer loop stops at maximum_iterations=3
    refs = jax.jit(lambda w, x: [jax.grad(_nested_ref, argnums=(0, 1))(w, x, min(n, 3)) for n in ns])(W, X0)
    for n, want in zip(ns, refs, strict=True):
        assert_close(g(W, X0, n, closes_over), want, label=f"n={n}")


def _in_scan(w, x, ns, closes_over):
    def scan_step(h, n):
        if closes_over:  # the loop's condition closes over the scanned int
            h = counted(w, h, n, 3)
        else:
            _, _, h = jta.while_loop(lambda d: d[0] < d[1], lambda d: (d[0] + 1, d[1], cell(w, d[2], 1.0)),
                                     (jnp.int32(0), n, h), maximum_iterations=3)
        return h, jnp.sum(h)

    h, sums = lax.scan(scan_step, x, ns)
    return jnp.sum(V * h) + jnp.sum(sums)


def _in_scan_ref(w, x, ns):
    total = 0.0
    for n in ns:
        x = counted_ref(w, x, min(int(n), 3))
        total = total + jnp.sum(x)
    return jnp.sum(V * x) + total


@pytest.mark.parametrize("closes_over", [
    pytest.param(False, id="limit-in-carry"),
    pytest.param(True, id="closure"),  # UnexpectedTracerError (jax.jvp: TypeError)
])
def test_while_loop_inside_lax_scan(closes_over):
    ns = np.int32([2, 0, 5])  # 5: stopped by maximum_iterations=3
    got = jax.jit(jax.grad(_in_scan, argnums=(0, 1)), static_argnums=3)(W, X0, ns, closes_over)
    assert_close(got, jax.jit(lambda w, x: jax.grad(_in_scan_ref, argnums=(0, 1))(w, x, ns))(W, X0))


@pytest.mark.parametrize("wrap", [
    pytest.param(jax.jit, id="grad-of-jit"),  # TypeError: No constant handler
    pytest.param(jax.checkpoint, id="checkpoint"),  # UnexpectedTracerError
])
def test_loop_closing_over_an_int_of_an_enclosing_trace(wrap):
    # counted's condition closes over n, an argument of the jitted or checkpointed function
    got = jax.grad(wrap(lambda x, n: jnp.sum(V * counted(W, x, n, 5))))(X0, 3)
    assert_close(got, jax.jit(jax.grad(lambda x: jnp.sum(V * counted_ref(W, x, 3))))(X0))


# -- fori_loop ----------------------------------------------------------------------------------

def _fori_body(i, h):
    return cell(W, h, 1.0) * (1.0 + 0.1 * i)


def test_fori_loop_with_static_bounds_is_lax_fori_loop():
    jaxpr = str(jax.make_jaxpr(lambda x: jta.fori_loop(1, 4, _fori_body, x))(X0))
    assert "scan[" in jaxpr and "while[" not in jaxpr  # reversible without maximum_iterations
    assert_close(jax.grad(lambda x: jnp.sum(V * jta.fori_loop(1, 4, _fori_body, x)))(X0),
                 jax.grad(lambda x: jnp.sum(V * lax.fori_loop(1, 4, _fori_body, x)))(X0))
    # maximum_iterations caps static bounds too, counting from lower: i = 2, 3; none when upper <= lower
    assert [float(jta.fori_loop(lo, hi, lambda i, s: s + i, 0.0, maximum_iterations=2))
            for lo, hi in ((2, 10), (5, 2))] == [5.0, 0.0]


def test_fori_loop_with_traced_bounds_is_a_while_loop():
    g = jax.jit(jax.grad(lambda x, lo, hi: jnp.sum(V * jta.fori_loop(lo, hi, _fori_body, x, maximum_iterations=3))))
    bounds = ((1, 3), (0, 7), (3, 1))  # two steps, stopped at three, none

    def ref(x, lo, hi):
        return jnp.sum(V * lax.fori_loop(lo, max(lo, min(hi, lo + 3)), _fori_body, x))

    refs = jax.jit(lambda x: [jax.grad(ref)(x, lo, hi) for lo, hi in bounds])(X0)
    for (lo, hi), want in zip(bounds, refs, strict=True):
        assert_close(g(X0, lo, hi), want, label=f"{lo}..{hi}")
    with pytest.raises(UnimplementedError, match="pass maximum_iterations"):
        jax.jit(jax.grad(lambda x, hi: jnp.sum(jta.fori_loop(0, hi, _fori_body, x))))(X0, 2)


# -- float64 -------------------------------------------------------------------------------------

def test_float64_gradient_matches_central_differences():
    with jax.enable_x64(True):
        w = W.astype(np.float64) + 1e-9  # not representable in float32
        x0 = X0.astype(np.float64)

        @jax.jit
        def f(x):
            return jnp.sum(V * jta.while_loop(lambda c: c[0] > 1.0, lambda c: step(w, c), (np.float64(10.0), x),
                                              maximum_iterations=BOUND)[1])

        grad = jax.jit(jax.grad(f))(x0)
        assert grad.dtype == np.float64
        eps = 1e-6
        central = [(f(x0 + eps * e) - f(x0 - eps * e)) / (2 * eps) for e in np.eye(2)]
        np.testing.assert_allclose(grad, central, rtol=1e-8, atol=1e-9)
        ref = jax.jit(jax.grad(lambda x: jnp.sum(V * halving_ref(w, x, np.float64(10.0), halvings(10.0)))))(x0)
        np.testing.assert_allclose(grad, ref, rtol=1e-13)
    assert not jax.config.jax_enable_x64  # restored


# -- the backward pass runs the steps that ran -------------------------------------------------

def while_trips(closed, *args) -> tuple[list[int], list]:
    """Runs the jaxpr ``closed`` on ``args`` (compiled, once) with a counter added to each of its
    ``while`` loops: how many iterations each ran (in program order), and the outputs."""
    def run(jaxpr, consts, args, trips):
        env = dict(zip(jaxpr.constvars, consts, strict=True))
        env.update(zip(jaxpr.invars, args, strict=True))
        read = lambda v: v.val if isinstance(v, jax_core.Literal) else env[v]  # noqa: E731
        for eqn in jaxpr.eqns:
            vals = [read(v) for v in eqn.invars]
            if eqn.primitive.name == "while":
                cond = jax_core.jaxpr_as_fun(eqn.params["cond_jaxpr"])
                body = jax_core.jaxpr_as_fun(eqn.params["body_jaxpr"])
                nc, nb = eqn.params["cond_nconsts"], eqn.params["body_nconsts"]
                cond_consts, body_consts = vals[:nc], vals[nc:nc + nb]

                def step(state, cond=cond, body=body, cond_consts=cond_consts, body_consts=body_consts):
                    # Batched, the condition has one flag per member (leading axis): the loop runs
                    # while any is on, and the members that are done keep their carry (as XLA's
                    # lowering of a batched while does).
                    count, carry = state
                    on = cond(*cond_consts, *carry)[0]
                    new = body(*body_consts, *carry)
                    return count + 1, [jnp.where(on.reshape(on.shape + (1,) * (a.ndim - on.ndim)), a, b)
                                       for a, b in zip(new, carry, strict=True)]

                count, out = lax.while_loop(lambda s, cond=cond, cc=cond_consts: jnp.any(cond(*cc, *s[1])[0]),
                                            step, (jnp.int32(0), vals[nc + nb:]))
                trips.append(count)
            elif eqn.primitive.name in ("jit", "pjit"):
                out = run(eqn.params["jaxpr"].jaxpr, eqn.params["jaxpr"].consts, vals, trips)
            elif eqn.primitive.name == "custom_jvp_call":  # the forward loop
                out = run(eqn.params["call_jaxpr"].jaxpr, eqn.params["call_jaxpr"].consts, vals, trips)
            elif eqn.primitive.name == "jta_loop_linear":  # lowered as its implementation, a while loop
                impl = jax.make_jaxpr(functools.partial(eqn.primitive.impl, **eqn.params))(*vals)
                out = run(impl.jaxpr, impl.consts, vals, trips)
            else:
                out = eqn.primitive.bind(*vals, **eqn.params)
                out = out if eqn.primitive.multiple_results else [out]
            env.update(zip(eqn.outvars, out, strict=True))
        return [read(v) for v in jaxpr.outvars]

    @jax.jit
    def counted_run(*args):
        trips: list = []
        return trips, run(closed.jaxpr, closed.consts, args, trips)

    trips, out = counted_run(*args)
    return [int(t) for t in trips], out


def test_backward_loop_runs_the_steps_that_ran_not_maximum_iterations():
    g = jax.grad(lambda x, n: jnp.sum(V * counted(W, x, n, 1000)))
    jaxpr = jax.make_jaxpr(g)(X0, 0)
    for n in (0, 3):
        trips, (grad,) = while_trips(jaxpr, X0, np.int32(n))
        assert len(trips) >= 2 and set(trips) == {n}, trips  # the forward loop and the backward one
        assert_close(grad, jax.jit(g)(X0, n))  # the counting run is the gradient's
    # batched: the loops run until the longest member is done (the others masked)
    vg, ns = jax.vmap(g), np.int32([1, 4])
    trips, (grads,) = while_trips(jax.make_jaxpr(vg)(XS[:2], ns), XS[:2], ns)
    assert len(trips) >= 2 and set(trips) == {4}, trips
    assert_close(grads, jax.jit(vg)(XS[:2], ns))


def test_checkpointed_body_stacks_only_the_carry_and_recomputes():
    """Memory for time, as with lax.scan: ``jax.checkpoint(body)`` makes the forward loop push only
    what the checkpoint saves (here the carry: one stack instead of one per intermediate), and the
    backward loop recompute the rest of each step; the gradient is the same."""
    w = np.asarray(np.random.default_rng(0).standard_normal((8, 8)) * 0.3, np.float32)

    def body(c):
        i, h = c
        a = jnp.tanh(h @ w)
        return i + 1, jnp.tanh(jnp.tanh(a @ w) @ w + h)

    def grad(b):
        return jax.jit(jax.grad(lambda h: jnp.sum(jta.while_loop(lambda c: c[0] < 7, b, (0, h),
                                                                 maximum_iterations=40)[1])))

    def stacks(b):  # the zero-filled [41, 8] buffers the forward loop pushes into
        text = grad(b).lower(np.ones(8, np.float32)).as_text()
        return len(re.findall(r"broadcast_in_dim .* -> tensor<41x8xf32>", text))

    h0 = np.linspace(-1, 1, 8).astype(np.float32)
    assert_close(grad(jax.checkpoint(body))(h0), grad(body)(h0))
    assert (stacks(jax.checkpoint(body)), stacks(body)) == (1, 6)
