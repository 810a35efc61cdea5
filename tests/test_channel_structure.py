"""The error channel meets program structure: one test (at least) per class of defect that an
adversarial user found (loops, stale results, static arguments, primitives without a rule,
hangs, exported records, batched records, bare jit). The structural fuzzer
(``test_structural_fuzz.py``) runs random programs of these classes."""

from __future__ import annotations

import os
import pathlib
import subprocess
import sys
import textwrap

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax

import jta
from jta._delivery import functionalize as _functionalize
from jta._delivery import hoisting

ROOT = pathlib.Path(__file__).resolve().parent.parent
WRITE_PAST = "TensorArray {name}: Tried to write to index {index} but array is not resizeable and size is: {size}"
READ_PAST = "Tried to read from index {index} but array size is: {size}"


def source(values=(1.0, 2.0, 3.0)):
    return jta.TensorArray(jnp.float32, size=len(values), element_shape=()).unstack(jnp.asarray(values))


def eager_error(f, *args):
    with jax.disable_jit():
        try:
            f(*args)
        except jta.errors.TensorArrayError as e:
            return type(e), str(e)
    return None


def checkify_error(f, *args):
    errors, _ = jax.jit(jta.checkify(f))(*args)
    exc = errors.exception
    return None if exc is None else (type(exc), str(exc))


# -- 1. a check moved out of a loop ------------------------------------------------------------
def test_swapped_carries_in_scan_keep_the_error():
    def f(x):
        a = jta.TensorArray(jnp.float32, size=3, element_shape=())
        b = jta.TensorArray(jnp.float32, size=3, element_shape=())  # (swapped carries share their metadata)
        (a, b), _ = lax.scan(lambda c, i: ((c[1].write(i, x), c[0]), None), (a, b), jnp.arange(5))
        return a.size()

    assert checkify_error(f, 1.0) == eager_error(f, 1.0)
    assert "index 3" in checkify_error(f, 1.0)[1]


def test_an_array_made_in_each_step_of_a_while_loop_reports_the_first_failing_step():
    def f(limit):
        def body(c):
            i, _ = c
            fresh = jta.TensorArray(jnp.float32, size=2, element_shape=(), tensor_array_name="fresh")
            return i + 1, fresh.write(i, 1.0)  # fails from i == 2 on; the carried array is replaced
        return lax.while_loop(lambda c: c[0] < limit, body,
                              (0, jta.TensorArray(jnp.float32, size=2, element_shape=(), tensor_array_name="fresh")))[0]

    assert checkify_error(f, 5) == eager_error(f, 5)
    assert "index 2" in checkify_error(f, 5)[1]


def spy_on_moves(monkeypatch, loop):
    """A list that gets, for each loop the functionalizer threads, what it moves out of the loop
    (``None``: nothing): the bookkeeping of a scan, the check of a while loop."""
    moved = []
    module, name = (hoisting, "plan") if loop == "scan" else (_functionalize, "_movable")
    original = getattr(module, name)
    monkeypatch.setattr(module, name, lambda *a: moved.append(original(*a)) or moved[-1])
    return moved


@pytest.mark.parametrize("loop", ["scan", "while"])
@pytest.mark.parametrize("shape", ["carried", "swapped", "fresh", "template", "cond", "nested"])
def test_a_check_moves_out_of_a_loop_only_when_its_record_descends_from_its_carry(shape, loop, monkeypatch):
    """``jta._delivery.hoisting.plan`` (a scan) and ``jta._delivery.functionalize._movable`` (a while
    loop): moved for a carried array updated in place, kept in the loop
    for swapped carries, arrays made in the body (from scratch or from a closed-over template),
    arrays chosen by a cond; the first error is the eager one either way."""
    moved = spy_on_moves(monkeypatch, loop)
    template = jta.TensorArray(jnp.float32, size=4, element_shape=(), tensor_array_name="a")

    def step(a, b, i, bad):
        j = jnp.where(i == bad, 7, i)
        if shape == "carried":
            return a.write(j, 1.0), b
        if shape == "swapped":
            return b.write(j, 1.0), a
        if shape == "fresh":
            return jta.TensorArray(jnp.float32, size=4, element_shape=(), tensor_array_name="a").write(j, 1.0), b
        if shape == "template":
            return template.write(j, 1.0), b
        if shape == "cond":
            return lax.cond(i % 2 == 0, lambda: a.write(j, 1.0), lambda: a), b
        inner = lax.scan(lambda t, k: (t.write(jnp.where(k == bad, 7, k), 1.0), None), a, jnp.arange(4))[0]
        return inner, b

    def f(bad):
        a = jta.TensorArray(jnp.float32, size=4, element_shape=(), tensor_array_name="a")
        b = jta.TensorArray(jnp.float32, size=4, element_shape=(), tensor_array_name="a")  # swappable with a
        if loop == "scan":
            (a, b), _ = lax.scan(lambda c, i: (step(*c, i, bad), None), (a, b), jnp.arange(4))
        else:
            _, a, b = lax.while_loop(lambda c: c[0] < 4, lambda c: (c[0] + 1, *step(c[1], c[2], c[0], bad)), (0, a, b))
        return a.size()

    assert checkify_error(f, 2) == eager_error(f, 2)
    assert ("index 7" in checkify_error(f, 2)[1]) or ("already been written" in checkify_error(f, 2)[1])
    outer = moved[0]  # the outer loop is examined before the loops in its body
    assert (outer is not None) == (shape == "carried"), moved


# -- 2. stale results of jta.checked ---------------------------------------------------------
def test_checked_returns_each_shapes_own_results():
    g = jta.checked(lambda x: jta.TensorArray(jnp.float32, size=x.shape[0], element_shape=x.shape[1:]).unstack(x))
    for shape in [(3, 2), (5, 4), (3, 2)]:
        ta = g(jnp.ones(shape))
        assert (ta.size(), ta.element_shape) == (shape[0], shape[1:])
    named = jta.checked(lambda x: (x.sum(), f"n={x.shape[0]}"))
    assert [named(jnp.ones(n))[1] for n in (2, 3, 2)] == ["n=2", "n=3", "n=2"]
    split = jta.checked(lambda x: tuple(x[i] for i in range(x.shape[0])))
    assert [len(split(jnp.ones(n))) for n in (2, 3, 2)] == [2, 3, 2]


# -- 3. static arguments, as jax.jit takes them ----------------------------------------------
def take(xs, n, i=0):
    return jta.TensorArray(jnp.float32, size=n, element_shape=()).unstack(xs[:n]).read(i)


def take_default(xs, i, n=3):
    return jta.TensorArray(jnp.float32, size=n, element_shape=()).unstack(xs[:n]).read(i)


def test_static_arguments_in_every_form_jax_jit_takes():
    xs = jnp.arange(4.0)
    assert jta.checked(take, static_argnames="n")(xs, 3, 1) == 1.0  # a name, passed positionally
    assert jta.checked(take, static_argnums=1)(xs, n=3, i=2) == 2.0  # a number, passed by keyword
    assert jta.checked(take_default, static_argnums=2)(xs, 1) == 1.0  # a number naming an omitted default
    assert jta.checked(take, static_argnums=-2)(xs, 2, 1) == 1.0
    with pytest.raises(jta.errors.InvalidArgumentError, match="index 3 but array size is: 3"):
        jta.checked(jax.jit(take, static_argnames="n"))(xs, 3, 3)


def test_python_ints_are_traced_once():
    traces = []

    def f(i):
        traces.append(i)
        return source().read(i)

    g = jta.checked(f)
    assert [float(g(i)) for i in (0, 1, 2)] == [1.0, 2.0, 3.0]
    assert len(traces) == 1


# -- 4. every primitive that holds a jaxpr ---------------------------------------------------
def test_grad_of_checkpoint_of_scan_reports_a_dropped_write_without_callbacks():
    def loss(x):
        def body(x):
            ta = jta.TensorArray(jnp.float32, size=3, element_shape=())
            lax.scan(lambda ta, i: (ta.write(i, x * i), None), ta, jnp.arange(4))
            return x * 2.0
        return jax.checkpoint(body)(x)

    run = jax.jit(jta.checkify(jax.grad(loss)))
    errors, grad = run(1.0)
    assert grad == 2.0 and "index 3" in str(errors.exception)
    assert "callback" not in run.lower(1.0).as_text()


def _invariant_read_after_counter_gather(xs, i):
    """A reverse scan whose steps gather at the counter (failing at the first step, t = n - 1)
    and then read at ``i`` (failing at every step): a loop-invariant read, which JAX evaluates
    once before the primal loop when it differentiates the scan."""
    ta = jta.TensorArray(jnp.float32, size=4, element_shape=(3,), clear_after_read=False).unstack(jnp.ones((4, 3)))

    def body(c, tx):
        t, x = tx
        total = c + ta.gather(jnp.stack([t, jnp.int32(0)])).sum() * x.sum() + ta.read(i).sum() * c
        return total, total
    total, ys = lax.scan(body, 1.0, (jnp.arange(xs.shape[0], dtype=jnp.int32), xs), reverse=True)
    return total + ys.sum()


@pytest.mark.parametrize("transform", ["grad", pytest.param("checkpoint", marks=pytest.mark.long_only), "linearize"])
def test_a_loop_invariant_check_stays_in_the_differentiated_loop(transform):
    """JAX hoists a scan body's loop-invariant work out of the loop when it differentiates it; a
    check there would report before the first step's earlier error, and with no step at all."""
    f = _invariant_read_after_counter_gather
    g = {"grad": jax.grad(f), "checkpoint": jax.grad(jax.checkpoint(f)),
         "linearize": lambda xs, i: jax.linearize(lambda xs: f(xs, i), xs)[1](xs)}[transform]
    xs = np.ones((6, 3), np.float32)
    expected = eager_error(g, xs, np.int32(4))
    assert expected == (jta.errors.InvalidArgumentError, READ_PAST.format(index=5, size=4))
    for run in (jta.checked(g), lambda *a: jta.throw(jax.jit(jta.checkify(g))(*a)[0])):
        with pytest.raises(jta.errors.InvalidArgumentError) as info:
            run(xs, np.int32(4))
        assert str(info.value) == expected[1]
        run(np.ones((0, 3), np.float32), np.int32(4))  # no step: no error


def test_custom_vjp_keeps_the_users_rule_and_reports_as_data():
    @jax.custom_vjp
    def h(x, i):
        return source().read(i) * x

    h.defvjp(lambda x, i: (h(x, i), None), lambda _, g: (42.0 * g, None))
    grad = jax.grad(lambda x, i: jta.checkify(h)(x, i)[1])
    assert grad(1.0, 0) == 42.0 and jax.jit(grad)(1.0, 0) == 42.0
    errors, _ = jax.jit(jta.checkify(h))(1.0, 5)
    assert str(errors.exception) == READ_PAST.format(index=5, size=3)
    errors, _ = jax.jit(jta.checkify(jax.grad(h)))(1.0, 5)  # the forward rule's check, as data
    assert str(errors.exception) == READ_PAST.format(index=5, size=3)


def test_custom_jvp_keeps_the_users_rule():
    @jax.custom_jvp
    def h(x, i):
        return source().read(i) * x

    h.defjvp(lambda primals, tangents: (h(*primals), 42.0 * tangents[0]))
    assert jax.grad(lambda x: jta.checkify(h)(x, 0)[1])(1.0) == 42.0
    errors, _ = jax.jit(jta.checkify(h))(1.0, 4)
    assert str(errors.exception) == READ_PAST.format(index=4, size=3)


def test_inner_jit_keeps_its_parameters():
    inner = jax.jit(lambda x, i: source().read(i) * x, donate_argnums=0)

    def f(x, i):
        return inner(x, i)

    jaxpr = jax.make_jaxpr(jta.checkify(f))(jnp.float32(1.0), 1)
    (call,) = [e for e in jaxpr.eqns if e.primitive.name == "jit"]
    assert call.params["donated_invars"][-2:] == (True, False)
    errors, _ = jax.jit(jta.checkify(f))(jnp.float32(1.0), 9)
    assert str(errors.exception) == READ_PAST.format(index=9, size=3)


def test_a_primitive_without_a_rule_is_refused_at_trace_time():
    # jax.custom_batching.custom_vmap holds a jaxpr that jta has no rule for.
    @jax.custom_batching.custom_vmap
    def read(i):
        return source().read(i)

    read.def_vmap(lambda size, batched, i: (jax.vmap(read)(i), True))
    with pytest.raises(jta.errors.UnimplementedError, match="'custom_vmap_call'"):
        jta.checkify(read)(1)


SHARD_MAP = """
import os
os.environ["XLA_FLAGS"] = "--xla_force_host_platform_device_count=2"
import jax, jax.numpy as jnp, jta
mesh = jax.make_mesh((2,), ("d",))
spec = jax.sharding.PartitionSpec

def f(x):
    def per_device(x):
        ta = jta.TensorArray(jnp.float32, size=2, element_shape=(1,))
        return ta.write(jnp.int32(x[0, 0]), x[0]).stack()
    return jax.shard_map(per_device, mesh=mesh, in_specs=spec("d"), out_specs=spec("d"))(x)

put = lambda v: jax.device_put(jnp.array(v), jax.sharding.NamedSharding(mesh, spec("d")))
print(jta.checked(f)(put([[0.0], [1.0]])).shape)
try:
    jta.checked(f)(put([[0.0], [5.0]]))
except jta.errors.InvalidArgumentError as e:
    print(e)
errors, _ = jax.jit(jta.checkify(f))(put([[9.0], [5.0]]))
print(errors.exception)
print("callback" in jax.jit(jta.checkify(f)).lower(put([[0.0], [1.0]])).as_text())
"""


def run_python(code: str) -> list[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    result = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True,
                            env=env, timeout=240, cwd=ROOT)
    assert result.returncode == 0, result.stderr[-3000:]
    return result.stdout.splitlines()


def test_shard_map_on_simulated_devices_reports_the_first_failing_device():
    lines = run_python(SHARD_MAP)
    assert lines == ["(4, 1)", WRITE_PAST.format(name="TensorArray", index=5, size=2),
                     WRITE_PAST.format(name="TensorArray", index=9, size=2), "False"]


# -- 5. loops stop at the first error ---------------------------------------------------------
def test_a_while_loop_whose_exit_needs_a_value_read_past_the_end_stops():
    src = source((1.0, 1.0, 1.0))

    def f(x):
        body = lambda c: (c[0] + 1, src.read(c[0]) * x)  # noqa: E731  (clamped reads would loop for ever)
        return lax.while_loop(lambda c: c[1] > 0, body, (0, 1.0))[0]

    with pytest.raises(jta.errors.InvalidArgumentError, match=READ_PAST.format(index=3, size=3)):
        jta.checked(f)(1.0)


def test_a_while_loop_appending_past_its_capacity_stops():
    def f(x):
        ta = jta.TensorArray(jnp.float32, size=0, dynamic_size=True, capacity=4, element_shape=())

        def body(c):
            i, ta = c
            return i + 1, ta.write(i, x)  # the only check is the carried array's: moved, and still stops
        return lax.while_loop(lambda c: c[0] >= 0, body, (0, ta))[0]

    with pytest.raises(jta.errors.InvalidArgumentError, match="beyond the static capacity 4"):
        jta.checked(f)(1.0)


# -- 6. portable records ----------------------------------------------------------------------
def test_an_exported_record_decodes_in_a_fresh_process(tmp_path):
    path = tmp_path / "last.bin"
    run_python(f"""
        import jax, jax.numpy as jnp, jta
        def last(xs, i):
            return jta.TensorArray(jnp.float32, size=3, element_shape=(), tensor_array_name="tokens").unstack(xs).read(i)
        exported = jax.export.export(jax.jit(jta.checkify(last)))(jnp.arange(3.0), 1)
        open({str(path)!r}, "wb").write(exported.serialize())
    """)
    lines = run_python(f"""
        import jax, jax.numpy as jnp, jta
        # another array traced first, so that a process-local table would name the wrong one
        jta.checkify(lambda i: jta.TensorArray(jnp.float32, size=1, element_shape=(), tensor_array_name="other").read(i))(4)
        exported = jax.export.deserialize(open({str(path)!r}, "rb").read())
        errors, value = exported.call(jnp.arange(3.0), 7)
        try:
            jta.throw(errors)
        except jta.errors.InvalidArgumentError as e:
            print(e)
            print(e.__notes__[0].split(", at ")[0])
    """)
    assert lines == [READ_PAST.format(index=7, size=3), "TensorArray 'tokens'"]


def test_exporting_a_bare_jit_program_that_reads_says_what_to_export():
    def last(xs, i):
        return source().read(i)

    with pytest.raises(jta.errors.UnimplementedError, match=r"Export jax.jit\(jta.checkify\(f\)\) instead"):
        jax.export.export(jax.jit(last))(jnp.arange(3.0), 1)


# -- 7. batched records -----------------------------------------------------------------------
def read(i):
    return source().read(i)


@pytest.mark.parametrize("mode", ["checked", "jit"])
def test_throw_takes_a_batched_record_and_vmapped_arrays_everywhere(mode):
    def from_record(i):
        errors, out = jax.vmap(jta.checkify(read))(i)
        jta.throw(errors)
        return out

    def from_arrays(i):
        return jta.throw(jax.vmap(lambda i: jta.TensorArray(jnp.float32, size=2, element_shape=()).write(i, 1.0))(i))

    for f, text in [(from_record, READ_PAST.format(index=7, size=3)),
                    (from_arrays, WRITE_PAST.format(name="TensorArray", index=7, size=2))]:
        if mode == "checked":
            with pytest.raises(jta.errors.InvalidArgumentError, match=text):
                jta.checked(f)(jnp.array([0, 7, 1]))
        else:
            with pytest.raises(jax.errors.JaxRuntimeError):
                jax.block_until_ready(jax.jit(f)(jnp.array([0, 7, 1])))
            with pytest.raises(jta.errors.InvalidArgumentError, match=text):
                jta.throw()


def guarded_read(i):
    return lax.cond(i < 3, lambda: source().read(i + 1), lambda: 0.0)


def looped_read(n):
    return lax.while_loop(lambda c: c[0] < n, lambda c: (c[0] + 1, c[1] + source().read(c[0])), (0, 0.0))[1]


@pytest.mark.parametrize("f", [guarded_read, looped_read])
def test_checked_of_vmap_agrees_with_vmap_of_checkify(f):
    """JAX runs a batched cond's every branch, and a batched while's body for finished members:
    their checks count only for the members that take the branch or still run."""
    fine, bad = (jnp.array([0, 2, 3]), jnp.array([1, 4, 2])) if f is looped_read else (jnp.array([0, 5]), jnp.array([5, 2]))
    errors, values = jax.vmap(jta.checkify(f))(fine)
    assert errors.exception is None
    np.testing.assert_array_equal(jta.checked(jax.vmap(f))(fine), values)
    np.testing.assert_array_equal(jax.jit(jax.vmap(f))(fine), values)  # bare jit: no callback fires
    with pytest.raises(jta.errors.InvalidArgumentError, match=READ_PAST.format(index=3, size=3)):
        jta.checked(jax.vmap(f))(bad)
    assert str(jax.vmap(jta.checkify(f))(bad)[0].exception) == READ_PAST.format(index=3, size=3)


# -- where: a note naming the array and the source line ---------------------------------------
def test_the_exception_names_the_array_and_the_users_line():
    def last(i):
        return jta.TensorArray(jnp.float32, size=3, element_shape=(), tensor_array_name="tokens").read(i)

    with pytest.raises(jta.errors.InvalidArgumentError) as info:
        jta.checked(last)(5)
    assert str(info.value) == READ_PAST.format(index=5, size=3)
    (note,) = info.value.__notes__
    assert note.startswith("TensorArray 'tokens', at ") and note.endswith(".last)")
    assert __file__ in note


# -- 10. bare jit: value ops raise ------------------------------------------------------------
def test_a_bare_jit_read_raises_at_run_time_and_throw_gives_jtas_exception():
    with pytest.raises(jax.errors.JaxRuntimeError):
        jax.block_until_ready(jax.jit(read)(5))
    with pytest.raises(jta.errors.InvalidArgumentError, match=READ_PAST.format(index=5, size=3)):
        jta.throw()


# -- 11. the wrapper: jax.jit's donation (its cost per call: benchmarks/wrapper_overhead.py) -----
def test_checked_keeps_the_donation_of_a_jitted_step():
    step = jta.checked(jax.jit(lambda ta, i, x: ta.write(i, x), donate_argnums=0))
    ta = step(jta.TensorArray(jnp.float32, size=4, element_shape=(1000,)), 0, jnp.ones(1000))
    buffer = ta._data
    ta = step(ta, 1, jnp.ones(1000))
    assert buffer.is_deleted()  # updated in place, not copied
    np.testing.assert_array_equal(ta.stack()[:2], np.ones((2, 1000)))


def test_an_exported_program_returns_arrays_and_raw_op_states():
    def f(i):
        state, handle, flow = jta.raw_ops.TensorArrayV3(jta.raw_ops.new_state(), 3, jnp.float32, element_shape=())
        state, _ = jta.raw_ops.TensorArrayWriteV3(state, handle, i, 1.0, flow)
        return jta.TensorArray(jnp.float32, size=3, element_shape=(2,), tensor_array_name="rows").write(i, jnp.ones(2)), state

    exported = jax.export.export(jax.jit(jta.checkify(f)))(1)
    errors, (ta, state) = jax.export.deserialize(exported.serialize()).call(1)
    assert errors.exception is None and ta.name == "rows" and ta.element_shape == (2,)
    np.testing.assert_array_equal(ta.stack(), [[0, 0], [1, 1], [0, 0]])
    np.testing.assert_array_equal(state["TensorArrayV3_0"].stack(), [0, 1, 0])
    errors, (ta, _) = jax.export.deserialize(exported.serialize()).call(5)
    assert str(errors.exception) == WRITE_PAST.format(name="TensorArrayV3_0", index=5, size=3)  # the first in program order


def test_recorded_error_codes_are_fixed():
    """An exported record is decoded by its code in whatever jta version runs it: the codes of
    the errors that can be recorded at traced values never change (append new ones)."""
    from jta._records.catalogue import Error

    assert {e.name: e.code for e in Error if e.fields} == {
        "WRITE_OUT_OF_RANGE": 1, "READ_OUT_OF_RANGE": 2, "SCATTER_OUT_OF_RANGE": 3, "WRITE_BEYOND_CAPACITY": 4,
        "READ_BEYOND_CAPACITY": 5, "TRACED_RAGGED_SPLIT": 6, "SPLIT_SUM": 7, "NEGATIVE_SPLIT_LENGTH": 8,
        "WRITE_AFTER_READ": 9, "WRITTEN_TWICE": 10, "READ_CLEARED": 11, "SPLIT_SIZE": 12, "SPLIT_PIECE_SHAPE": 13,
        "SPLIT_PIECES_INCONSISTENT": 14, "LOOP_STACK_FULL": 504, "ARRAY_SIZE_LEARNED": 505,
        "RESULT_SIZE_LEARNED": 506, "LOOP_STACK_UNPLANNED": 507, "LOOP_STEPS_LEARNED": 508}
    assert len({e.code for e in Error}) == len(Error)


# -- every primitive that holds a function: a rule, or a refusal at trace time ------------------
def _checks_inside(op):
    """``i -> value``: ``op`` wraps a function that reads slot ``i`` of a size-3 array and makes a
    dropped double write at ``i`` (both checks inside the construct ``op`` builds)."""
    def inner(i):
        ta = jta.TensorArray(jnp.float32, size=3, element_shape=())
        ta.write(i, 1.0).write(i, 2.0)  # dropped: only the channel can report it
        return ta.unstack(jnp.arange(3.0)).read(i % 4)
    return lambda i: op(inner, i)


HIGHER_ORDER = {
    "jit": lambda f, i: jax.jit(f)(i),
    "closed_call": lambda f, i: jax.named_call(f, name="named")(i),
    "scan": lambda f, i: lax.scan(lambda c, _: (f(i), None), 0.0, None, length=2)[0],
    "while": lambda f, i: lax.while_loop(lambda c: c[0] < 1, lambda c: (c[0] + 1, f(i)), (0, 0.0))[1],
    "cond": lambda f, i: lax.cond(i >= 0, f, lambda i: 0.0, i),
    "switch": lambda f, i: lax.switch(jnp.clip(i, 0, 1), [f, f], i),
    "map": lambda f, i: lax.map(f, jnp.stack([i, i]))[0],
    "checkpoint": lambda f, i: jax.checkpoint(f)(i),
    "custom_jvp": lambda f, i: _custom_jvp(f)(i),
    "custom_vjp": lambda f, i: _custom_vjp(f)(i),
    "composite": lambda f, i: lax.composite(f, name="jta.test")(i),
    "jta.while_loop": lambda f, i: jta.while_loop(lambda c: c[0] < 1, lambda c: (c[0] + 1, f(i)), (0, 0.0))[1],
    "custom_vmap": lambda f, i: _custom_vmap(f)(i),
    "custom_linear_solve": lambda f, i: lax.custom_linear_solve(lambda x: x * f(i), jnp.float32(1.0),
                                                                lambda mv, b: b)
}
REFUSED = {"custom_vmap": "'custom_vmap_call'", "custom_linear_solve": "'custom_linear_solve'"}


def _custom_jvp(f):
    g = jax.custom_jvp(f)
    g.defjvp(lambda p, t: (f(*p), 0.0))
    return g


def _custom_vjp(f):
    g = jax.custom_vjp(f)
    g.defvjp(lambda i: (f(i), None), lambda _, ct: (None,))
    return g


def _custom_vmap(f):
    g = jax.custom_batching.custom_vmap(f)
    g.def_vmap(lambda size, batched, i: (jax.vmap(f)(i), True))
    return g


@pytest.mark.rotate("mode")
@pytest.mark.parametrize("mode", ["checked", "checkify", "export"])
@pytest.mark.parametrize("construct", sorted(HIGHER_ORDER))
@pytest.mark.parametrize("index", [1, 7])
def test_checks_inside_every_higher_order_construct_are_threaded_or_refused(construct, index, mode):
    """A check inside a construct that holds a function (a jaxpr parameter) is never skipped: the
    construct has a rule, and both the dropped write (index 1) and the read (index 7) are reported
    with the class and text of the op-by-op run (jax.disable_jit()), under jta.checked and jax.jit(jta.checkify), and exported; or it
    is refused at trace time naming the primitive (a primitive that drops its body's effects, as
    lax.composite does, is recognized by its jaxpr parameters)."""
    f = _checks_inside(HIGHER_ORDER[construct])
    if construct in REFUSED:
        with pytest.raises(jta.errors.UnimplementedError, match=REFUSED[construct]):
            jta.checked(f)(index)
        return
    with pytest.raises(jta.errors.InvalidArgumentError) as eager, jax.disable_jit():
        f(index)
    with pytest.raises(jta.errors.InvalidArgumentError) as got:
        if mode == "checked":
            jta.checked(f)(index)
        else:
            run = jax.jit(jta.checkify(f))
            if mode == "export":
                run = jax.export.deserialize(jax.export.export(run)(index).serialize()).call
            jta.throw(run(index)[0])
    assert str(got.value) == str(eager.value), (mode, str(got.value))
