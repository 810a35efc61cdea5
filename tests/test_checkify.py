"""``jta.checkify`` and ``jta.checked``: every TensorArray check of a program, as data.

* Nothing is lost: an error surfaces from an array that is returned, from a read of a closed-over
  array inside ``lax.scan``, from raw-op states that are dropped, under ``vmap`` (both ways round),
  ``grad`` of a scan, a ``dynamic_size`` ``while_loop`` decoder, the taken branch of ``lax.cond``
  and ``jax.checkpoint``; each time with the class and text of the same program run eagerly
  (``jax.disable_jit()``), and without error the values of the plain function.
* The first error in program order wins (a double write before an out-of-range write; the
  earlier of two failing scan iterations).
* The checkified function called eagerly, under ``jit``, inside ``lax.scan``, under
  ``jax.disable_jit()`` and with x64 (an int64 index is not wrapped).
* No host callback in the functionalized program; ``checked`` compiles once for different
  Python ints, and once per static non-array configuration.
"""

from __future__ import annotations

import functools
from typing import Any, Optional

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax

import jta
from jta import raw_ops as ops
from tests.helpers import k_text
from tests.helpers.errors import run_reporting

f32 = jnp.float32
i32 = np.int32
ERRORS = (jta.errors.TensorArrayError, ValueError)
WRITTEN = "Could not write to TensorArray index {} because it has already been written to."
CLEARED = ("Could not read index {} twice because it was cleared after a previous read "
           "(perhaps try setting clear_after_read = false?).")
READ_PAST = "Tried to read from index {} but array size is: 3"


def filled(n: int = 3) -> jta.TensorArray:
    return jta.TensorArray(f32, size=n, element_shape=()).unstack(jnp.arange(n, dtype=f32))


def read(i):
    return filled().read(i)


# -- the programs: each drops or hides its arrays in another way --------------------------------
def returned(i):
    return jta.TensorArray(f32, size=3, element_shape=()).write(i, 1.0)


def scan_read(i):  # the array is closed over and never returned
    ta = filled()
    return lax.scan(lambda c, k: (c + ta.read(i + k), None), 0.0, jnp.arange(2))[0]


def raw_write_twice(i, j):  # state dropped: only a gathered value is returned
    s, h, flow = ops.TensorArrayV3(ops.new_state(), 3, f32, element_shape=())
    s, flow = ops.TensorArrayWriteV3(s, h, i, 1.0, flow)
    s, flow = ops.TensorArrayWriteV3(s, h, j, 2.0, flow)
    return ops.TensorArrayGatherV3(s, h, jnp.array([2]), flow, f32)[1]


def raw_read_twice(i, j):  # clear_after_read (default): the second read of a slot fails
    s, h, flow = ops.TensorArrayV3(ops.new_state(), 3, f32, element_shape=())
    s, flow = ops.TensorArrayScatterV3(s, h, jnp.arange(3), jnp.arange(3.0), flow)
    s, v = ops.TensorArrayReadV3(s, h, i, flow, f32)
    return v + ops.TensorArrayReadV3(s, h, j, flow, f32)[1]


def scan_loss(w, idx):
    ta, _ = lax.scan(lambda ta, i: (ta.write(i, w * i), None), jta.TensorArray(f32, size=3, element_shape=()), idx)
    return jnp.sum(ta.stack() ** 2)


def decoder(n):  # grows past its capacity; only the size leaves the program
    def body(c):
        return c[0] + 1, c[1].write(c[0], c[0].astype(f32))

    ta = jta.TensorArray(f32, size=0, dynamic_size=True, capacity=4, element_shape=())
    return lax.while_loop(lambda c: c[0] < n, body, (0, ta))[1].size()


def branch(p, i):
    return lax.cond(p, lambda: read(i), lambda: jnp.float32(-1.0))


def remat(w, i):
    return jax.checkpoint(lambda w: read(i) * w)(w)


def write_twice_then_past_end(i, j, k):
    ta = jta.TensorArray(f32, size=3, element_shape=()).write(i, 1.0).write(j, 2.0).write(k, 3.0)
    return ta.stack()


def scan_reads(idx):  # one read per iteration
    ta = filled()
    return lax.scan(lambda c, i: (c + ta.read(i), None), 0.0, idx)[0]


CASES = {
    # id: (f, failing args, error text (the array's name aside), args with no error)
    "returned-array": (returned, (i32(5),),
                       "Tried to write to index 5 but array is not resizeable and size is: 3", (i32(1),)),
    "closed-over-read-in-scan": (scan_read, (i32(2),), READ_PAST.format(3), (i32(1),)),
    "raw-write-twice-state-dropped": (raw_write_twice, (i32(0), i32(0)), WRITTEN.format(0), (i32(0), i32(1))),
    "raw-read-cleared-state-dropped": (raw_read_twice, (i32(1), i32(1)), CLEARED.format(1), (i32(1), i32(2))),
    "vmap-inside": (jax.vmap(read), (i32([0, 7, 5]),), READ_PAST.format(7), (i32([2, 0, 1]),)),
    "grad-of-scan": (jax.jit(jax.grad(scan_loss)), (1.5, i32([0, 1, 1])), WRITTEN.format(1),
                     (1.5, i32([2, 0, 1]))),
    "while-decoder-past-capacity": (decoder, (i32(6),), "Tried to write to index 4 beyond the static capacity 4",
                                    (i32(3),)),
    "cond-taken-branch": (branch, (True, i32(5)), READ_PAST.format(5), (False, i32(5))),
    "checkpoint": (remat, (2.0, i32(5)), READ_PAST.format(5), (2.0, i32(1))),
    # first error in program order
    "order-write-twice-then-past-end": (write_twice_then_past_end, (i32(0), i32(0), i32(7)), WRITTEN.format(0),
                                        (i32(0), i32(2), i32(1))),
    "order-earlier-scan-iteration": (scan_reads, (i32([0, 7, 5]),), READ_PAST.format(7), (i32([2, 1, 0]),)),
}


def outcome(fn: Any, *args: Any) -> Optional[tuple[str, str]]:
    try:
        jta.throw(fn(*args))
    except ERRORS as e:
        return type(e).__name__, str(e)
    return None


def eager(fn: Any, *args: Any) -> Optional[tuple[str, str]]:
    """``fn`` run op by op (loops in Python): the error as the first failing op raised it."""
    with jax.disable_jit():
        return outcome(fn, *args)


@functools.cache
def eager_case(case: str) -> Optional[tuple[str, str]]:
    f, bad, _, _ = CASES[case]
    return eager(f, *bad)


def described(errors: jta.ErrorRecord) -> Optional[tuple[str, str]]:
    exc = errors.exception
    return None if exc is None else (type(exc).__name__, str(exc))


def values(tree: Any) -> list:
    """Every leaf but arrays' flows (each new array's is distinct)."""
    return [np.asarray(x) for p, x in jax.tree_util.tree_leaves_with_path(tree) if "flow" not in jax.tree_util.keystr(p)]


@pytest.mark.rotate("how")
@pytest.mark.parametrize("how", ["jit-checkify", "checked"])
@pytest.mark.parametrize("case", list(CASES))
def test_error_as_eagerly_and_values_as_plain(case, how):
    """The failing call reports the eager error; the same compiled function, called with no
    error, reports none and gives the plain function's values."""
    f, bad, text, good = CASES[case]
    expected = eager_case(case)
    assert expected is not None and expected[0] == "InvalidArgumentError" and text in expected[1], expected
    if how == "checked":
        run = jta.checked(f)
        assert outcome(run, *bad) == expected
        out = run(*good)
    else:
        run = jax.jit(jta.checkify(f))
        errors, _ = run(*bad)
        assert isinstance(errors, jta.ErrorRecord) and described(errors) == expected
        assert repr(errors) == f"ErrorRecord({expected[0]}: {expected[1]})"
        with pytest.raises(jta.errors.InvalidArgumentError) as info:
            jta.throw(errors)
        assert str(info.value) == expected[1]
        errors, out = run(*good)
        assert errors.exception is None and repr(errors) == "ErrorRecord(no error)"
        assert jta.throw(errors) is errors
    plain = jax.jit(f)(*good)  # (eagerly, lax.cond traces the untaken branch with a static index)
    assert len(values(out)) == len(values(plain))
    for got, want in zip(values(out), values(plain), strict=True):
        np.testing.assert_array_equal(got, want)


def test_checkify_inside_vmap_gives_a_batched_record_raising_the_first_failing_member():
    run = jax.jit(jax.vmap(jta.checkify(read)))
    errors, out = run(i32([0, 7, 1, 5]))
    assert errors.record.shape[0] == 4
    np.testing.assert_array_equal(np.asarray(errors.record)[:, 0] != 0, [False, True, False, True])
    np.testing.assert_array_equal(out[np.array([0, 2])], [0.0, 1.0])
    with pytest.raises(jta.errors.InvalidArgumentError, match=k_text(READ_PAST.format(7))):
        jta.throw(errors)
    assert run(i32([0, 2, 1, 0]))[0].exception is None


# -- the checkified function, called in each way -----------------------------------------------
def test_checkify_eagerly_under_jit_and_disable_jit():
    """Plain compiled code raises from a host callback; the plain function called eagerly (its
    scan compiled by JAX's eager dispatch) or under ``disable_jit`` raises jta's error at once;
    checkify hands the same error back as data in every case."""
    text = READ_PAST.format(3)
    (errors, out), (jit_errors, jit_out) = jta.checkify(scan_read)(i32(2)), jax.jit(jta.checkify(scan_read))(i32(2))
    assert str(errors.exception) == str(jit_errors.exception) == text and out == jit_out
    with pytest.raises(jax.errors.JaxRuntimeError):  # plain: a host callback, in compiled code
        jax.block_until_ready(jax.jit(scan_read)(i32(2)))
    with pytest.raises(jta.errors.InvalidArgumentError, match=k_text(text)):
        jta.throw()  # what the callback raised, as jta's class
    with pytest.raises(jta.errors.InvalidArgumentError, match=k_text(text)):
        scan_read(i32(2))  # eager: the scan raises jta's error when it returns
    with jax.disable_jit():
        with pytest.raises(jta.errors.InvalidArgumentError, match=k_text(text)):
            scan_read(i32(2))  # op by op: raises at once, with jta's class
        errors, out = jta.checkify(scan_read)(i32(2))  # checkify still hands the error back as data
        assert str(errors.exception) == text
        assert out == jit_out
        with pytest.raises(jta.errors.InvalidArgumentError, match=k_text(text)):
            jta.checked(scan_read)(i32(2))


def test_checkify_inside_scan_stacks_one_record_per_iteration():
    def body(c, i):
        errors, v = jta.checkify(scan_read)(i)
        return c + v, errors

    _, errors = lax.scan(body, 0.0, i32([0, 5, 2, 1]))
    np.testing.assert_array_equal(np.asarray(errors.record)[:, 0] != 0, [False, True, True, False])
    assert str(errors.exception) == READ_PAST.format(5)  # the earlier iteration
    assert lax.scan(body, 0.0, i32([0, 1]))[1].exception is None


def test_x64_index_is_reported_unwrapped():
    big = 2**33 + 1
    with jax.enable_x64(True):
        text = READ_PAST.format(big)
        expected = eager(scan_read, np.int64(big))
        assert expected == ("InvalidArgumentError", text)
        errors, _ = jax.jit(jta.checkify(scan_read))(np.int64(big))
        assert errors.record.dtype == np.int64 and described(errors) == expected
        assert outcome(jta.checked(scan_read), big) == expected  # a Python int, traced as int64


def test_functionalized_program_has_no_host_callback():
    assert "callback" in jax.jit(scan_read).lower(i32(0)).as_text()
    assert "callback" not in jax.jit(jta.checkify(scan_read)).lower(i32(0)).as_text()


def test_checked_traces_python_ints_once():
    traces = []

    def f(i, scale):
        traces.append(1)
        return filled().read(i) * scale

    g = jta.checked(f)
    assert g(0, 2.0) == 0.0 and g(2, 3.0) == 6.0
    assert len(traces) == 1  # ints and floats are traced: one compilation
    with pytest.raises(jta.errors.InvalidArgumentError, match=k_text(READ_PAST.format(4))):
        g(4, 1.0)
    assert len(traces) == 1


def test_checked_static_config_traces_once_per_config():
    traces = []

    def f(i, mode, signs):
        traces.append((mode, signs))
        value = filled().read(i) * (2.0 if mode == "double" else 1.0)
        return -value if signs == ("neg",) else value

    g = jta.checked(f, static_argnames=("mode", "signs"))  # as jax.jit: strings are static when marked
    assert g(1, "double", ("neg",)) == -2.0 and g(2, "double", ("neg",)) == -4.0
    assert traces == [("double", ("neg",))]
    assert g(1, "single", ("pos",)) == 1.0
    assert len(traces) == 2  # a new static config: traced again
    with pytest.raises(jta.errors.InvalidArgumentError, match=k_text(READ_PAST.format(4))):
        g(4, "double", ("neg",))


@pytest.mark.parametrize("write_step, read_step", [(2, 4), (4, 2)])
def test_first_error_of_a_loop_that_writes_one_array_and_reads_another(write_step, read_step, monkeypatch):
    """A loop whose checks are its carried array's write and a read of another array at indices
    from the scan's input decides both after the loop (``jta._delivery.hoisting``), and still
    reports the earlier of a later read and an earlier double write."""
    src = jta.TensorArray(jnp.float32, size=6, element_shape=()).unstack(jnp.arange(6.0))

    def f(write_step, read_step):
        out = jta.TensorArray(jnp.float32, size=6, element_shape=())

        def step(out, t):
            value = src.read(jnp.where(t == read_step, 9, t))
            return out.write(jnp.where(t == write_step, 0, t), value), None

        return jax.lax.scan(step, out, jnp.arange(6))[0].stack()

    def write_only(write_step):
        out = jta.TensorArray(jnp.float32, size=6, element_shape=())
        step = lambda out, t: (out.write(jnp.where(t == write_step, 0, t), 1.0), None)  # noqa: E731
        return jax.lax.scan(step, out, jnp.arange(6))[0]

    with jax.disable_jit():
        try:
            f(write_step, read_step)
        except jta.errors.InvalidArgumentError as e:
            eager = str(e)
    errors, _ = jax.jit(jta.checkify(f))(write_step, read_step)
    assert str(errors.exception) == eager
    assert ("already been written" in eager) == (write_step < read_step)
    from tests.test_channel_structure import spy_on_moves
    moved = spy_on_moves(monkeypatch, "scan")
    errors, ta = jax.jit(jta.checkify(write_only))(write_step)  # the moved check still reports
    assert "already been written" in str(errors.exception)
    assert [m is not None for m in moved] == [True]


def test_static_arguments_of_a_jitted_function_stay_static():
    """``jta.checked(jax.jit(f, static_argnums=...))`` keeps ``f``'s static arguments static
    (a size is a Python int), and ``static_argnums=``/``static_argnames=`` work as in ``jax.jit``."""
    def take(xs, n, i):
        return jta.TensorArray(jnp.float32, size=n, element_shape=()).unstack(xs[:n]).read(i)

    xs = jnp.arange(4.0)
    jitted = jta.checked(jax.jit(take, static_argnums=1))
    assert jitted(xs, 3, 2) == 2.0 and jitted(xs, 4, 3) == 3.0
    with pytest.raises(jta.errors.InvalidArgumentError, match="index 3 but array size is: 3"):
        jitted(xs, 3, 3)
    assert jta.checked(take, static_argnums=(1,))(xs, 2, 1) == 1.0
    errors, value = jax.jit(jta.checkify(take, static_argnames="n"), static_argnames="n")(xs, n=2, i=5)
    assert "index 5 but array size is: 2" in str(errors.exception)


def test_outputs_that_are_not_arrays_come_back_as_they_are():
    """A raw-op program returning its handle (a string) beside the state."""
    def f(i):
        state, h, flow = ops.TensorArrayV3(ops.new_state(), 3, jnp.float32, element_shape=())
        state, flow = ops.TensorArrayWriteV3(state, h, i, 1.0, flow)
        return state, h

    state, handle = jta.checked(f)(1)
    assert handle == "TensorArrayV3_0" and float(state[handle].read(1)) == 1.0
    errors, (_, handle) = jta.checkify(f)(5)
    assert handle == "TensorArrayV3_0" and "index 5" in str(errors.exception)
    with pytest.raises(jta.errors.InvalidArgumentError, match="index 5"):
        jta.checked(f)(5)


def _member_loop(n, cap):
    """Reads slots 0..n-1 (clamped to ``cap``): a member that stops at n=4 would fail in a 5th step."""
    src = filled(4)
    return jax.lax.while_loop(lambda c: c[0] < n,
                              lambda c: (c[0] + 1, c[1] + src.read(jnp.minimum(c[0], cap))), (0, 0.0))[1]


def _member_cond(k):
    src = filled(4)
    return jax.lax.cond(k > 0, lambda: src.read(k + 10), lambda: 0.0)


def test_vmap_outside_checkify_checks_only_the_steps_and_branches_each_member_runs():
    """JAX's vmap runs both branches of a cond with a per-member predicate, and a while loop's
    body for every member until the last one stops; ``jax.vmap(jta.checkify(f))`` threads each
    member's record through its own branch and steps, so neither reports an error no member made
    (README, "vmap and checks"), while real ones are reported."""
    errors, _ = jax.jit(jax.vmap(jta.checkify(_member_cond)))(jnp.array([0, 0]))
    assert errors.exception is None
    errors, _ = jax.jit(jax.vmap(jta.checkify(_member_cond)))(jnp.array([0, 1]))
    assert "index 11" in str(errors.exception)
    errors, values = jax.jit(jax.vmap(jta.checkify(_member_loop)))(jnp.array([4, 8]), jnp.array([100, 3]))
    assert errors.exception is None
    np.testing.assert_allclose(values, [_member_loop(4, 100), _member_loop(8, 3)])
    errors, _ = jax.jit(jax.vmap(jta.checkify(_member_loop)))(jnp.array([4, 8]), jnp.array([100, 5]))
    assert "index 4" in str(errors.exception)


def test_checkify_of_a_vmapped_while_loop_with_per_member_predicates_runs():
    errors, values = jax.jit(jta.checkify(jax.vmap(_member_loop)))(jnp.array([2, 3]), jnp.array([100, 100]))
    assert errors.exception is None
    np.testing.assert_allclose(values, [1.0, 3.0])


def test_raw_read_after_clear_is_the_first_error_under_a_bare_jit_too():
    """A raw read of a cleared slot is recorded at once, so a later out-of-range write does not
    take its place in a returned state, eagerly or under a bare ``jax.jit``."""
    def f(i, k):
        state, h, flow = ops.TensorArrayV3(ops.new_state(), 2, jnp.float32, element_shape=())
        state, flow = ops.TensorArrayWriteV3(state, h, 0, 1.0, flow)
        state, _ = ops.TensorArrayReadV3(state, h, 0, flow, jnp.float32)
        state, _ = ops.TensorArrayReadV3(state, h, i, flow, jnp.float32)  # i = 0: cleared
        state, flow = ops.TensorArrayWriteV3(state, h, k, 2.0, flow)  # k = 5: out of range
        return state

    with pytest.raises(jta.errors.InvalidArgumentError) as eager, jax.disable_jit():
        f(0, 5)
    for run in (lambda: jta.throw(run_reporting("jit", f, 0, 5)), lambda: jta.checked(f)(0, 5)):
        with pytest.raises(jta.errors.InvalidArgumentError) as got:
            run()
        assert str(got.value) == str(eager.value) and "cleared" in str(got.value)


class _Plain:  # not a pytree: jax.jit refuses to return it
    def __init__(self, x):
        self.x = x


def test_outputs_are_what_jax_jit_accepts_plus_inert_values():
    """An object of a plain class may hold a tracer: refused as jax.jit refuses it (a TypeError
    naming the type), never returned holding a leaked tracer; strings, dtypes and types come back
    as returned, also under jax.disable_jit(), where nothing else unwraps them."""
    with pytest.raises(TypeError, match="jit returned a value of type .*_Plain.*not a valid JAX type"):
        jax.jit(lambda x: _Plain(x * 2))(1.0)
    for disable in (False, True):
        with jax.disable_jit(disable):
            with pytest.raises(TypeError, match="jta.checkify returned a value of type .*_Plain.*not a valid JAX"):
                jta.checked(lambda x: _Plain(x * 2))(1.0)
            out = jta.checked(lambda x: ("handle", jnp.float32, int, x * 2))(1.0)
            assert out[:3] == ("handle", jnp.float32, int) and float(out[3]) == 2.0


def test_every_mode_notes_the_array_and_the_line():
    """The note (PEP 678) naming the array and the user's line is on every error: eager ones found
    while the op runs (a static index) or from its record, raw ops' (the handle) and compiled ones."""
    def read(i):
        return jta.TensorArray(jnp.float32, size=3, element_shape=(), tensor_array_name="arr").read(i)

    def raw(i):
        state, h, flow = jta.raw_ops.TensorArrayV3(jta.raw_ops.new_state(), 3, jnp.float32, (),
                                                    tensor_array_name="raw")
        return jta.raw_ops.TensorArrayReadV3(state, h, i, flow, jnp.float32)[1]

    line = read.__code__.co_firstlineno + 1
    for fn, name, at in ((read, "'arr'", f"test_checkify.py:{line} ("), (raw, "'raw_0'", f"test_checkify.py:{line + 5} (")):
        for mode, arg in ((fn, 7), (jta.checked(fn), 7), (jax.vmap(fn), jnp.array([1, 7]))):
            with pytest.raises(jta.errors.InvalidArgumentError) as info:
                mode(arg)
            notes = getattr(info.value, "__notes__", [])
            assert any(note.startswith(f"TensorArray {name}, at ") and at in note for note in notes), notes


def test_batched_members_failing_at_different_steps_report_as_documented():
    """docs/errors.md: jta.checked(vmap(f)), eager vmap(f) and a bare jit(vmap(f)) raise the first
    error in program order across members (member 1 at step 1); a batched ErrorRecord from
    vmap(checkify(f)) holds one error per member and raises the first failing member's (member 0
    at step 2)."""
    def f(i):
        ta = jta.TensorArray(jnp.float32, size=3, element_shape=()).unstack(jnp.arange(3.0))
        return lax.scan(lambda c, t: (c + ta.read(t * i), None), 0.0, jnp.arange(3))[0]

    members = jnp.array([2, 5])  # member 0 reads index 4 at step 2, member 1 index 5 at step 1
    program_order, first_member = "index 5 but", "index 4 but"
    for run in (jta.checked(jax.vmap(f)), jax.vmap(f)):
        with pytest.raises(jta.errors.InvalidArgumentError, match=program_order):
            run(members)
    errors, _ = jax.jit(jax.vmap(jta.checkify(f)))(members)
    with pytest.raises(jta.errors.InvalidArgumentError, match=first_member):
        jta.throw(errors)
    errors, _ = jax.jit(jta.checkify(jax.vmap(f)))(members)
    with pytest.raises(jta.errors.InvalidArgumentError, match=program_order):
        jta.throw(errors)
