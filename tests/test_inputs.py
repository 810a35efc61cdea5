"""Every input either right or a clear error, eagerly and under ``jax.jit`` where it applies: arrays
used outside the vmap that made them, non-integer indices, 64-bit dtypes without x64, unnamed
arrays, impossible sizes, structure changed in a loop body, bad shape_to_prepend, values, dtypes
and sizes, and the gradients and growth order TensorFlow gives."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jta
from jta import gradients
from jta import raw_ops as ops

from .helpers import internals
from .helpers.modes import NOTE

MODES = ["eager", "jit"]


def run(mode, fn, *args):
    return jax.jit(fn)(*args) if mode == "jit" else fn(*args)


def small(**kw):
    return jta.TensorArray(jnp.float32, size=3, element_shape=(), **kw)


# -- arrays returned by jax.vmap, used outside it ---------------------------------------------

@pytest.fixture
def batched():
    return jax.vmap(lambda x: small().write(0, x))(jnp.arange(4.0))


@pytest.mark.parametrize("method", ["stack", "gather", "read", "write", "size", "concat", "scatter", "unstack"])
def test_vmapped_array_outside_vmap_raises_one_clear_error(batched, method):
    call = {"stack": lambda t: t.stack(), "gather": lambda t: t.gather([1, 0]), "read": lambda t: t.read(0),
            "write": lambda t: t.write(1, 1.0), "size": lambda t: t.size(), "concat": lambda t: t.concat(),
            "scatter": lambda t: t.scatter([1], jnp.ones(1)), "unstack": lambda t: t.unstack(jnp.ones(3))}[method]
    for fn in (call, jax.jit(call)):
        with pytest.raises(ValueError, match=r"holds a batch of arrays \(batch shape \(4,\)\).*inside jax.vmap"):
            fn(batched)


def test_vmapped_array_inside_vmap_works(batched):
    np.testing.assert_array_equal(jax.vmap(lambda t: t.gather([1, 0]))(batched), [[0, 0], [0, 1], [0, 2], [0, 3]])


# -- non-integer indices ----------------------------------------------------------------------

@pytest.mark.parametrize("index, cls, text", [
    (0.5, TypeError, "Expected int32 passed to parameter 'index' of op 'TensorArrayWriteV3', got 0.5 of type "
                     "'float' instead. Error: Expected int32, but got 0.5 of type 'float'."),
    ("2", TypeError, "Expected int32 passed to parameter 'index' of op 'TensorArrayWriteV3', got '2' of type "
                     "'str' instead. Error: Expected int32, but got 2 of type 'str'."),
    (None, ValueError, "Tried to convert 'index' to a tensor and failed. Error: None values not supported."),
    (1j, TypeError, "Expected int32 passed to parameter 'index' of op 'TensorArrayWriteV3', got 1j"),
    (np.float32(1.5), TypeError, "Input 'index' of 'TensorArrayWriteV3' Op has type float32"),
])
def test_non_integer_write_index_is_refused(index, cls, text):
    with pytest.raises(cls, match="^" + __import__("re").escape(text)):
        small().write(index, 1.0)


@pytest.mark.parametrize("mode", MODES)
def test_traced_float_index_is_refused(mode):
    with pytest.raises(TypeError, match="Input 'index' of 'TensorArrayReadV3' Op has type float32 that does not "
                                        "match expected type of int32."):
        run(mode, lambda i: small().read(i), jnp.float32(1.0))


@pytest.mark.parametrize("index", [True, np.bool_(True), np.int8(1), np.uint64(1), np.float32(1.0), 1])
def test_integer_like_indices_write_their_slot(index):
    np.testing.assert_array_equal(small().write(index, 5.0).stack(), [0, 5, 0])  # TF: True is slot 1


def test_gather_and_scatter_refuse_float_indices_also_in_raw_ops():
    with pytest.raises(TypeError, match="parameter 'indices' of op 'TensorArrayGatherV3'"):
        small().gather([0.5, 1.0])
    with pytest.raises(TypeError, match="parameter 'indices' of op 'TensorArrayScatterV3'"):
        small().scatter([0.5], jnp.ones(1))
    state, h, flow = ops.TensorArrayV3(ops.new_state(), 3, jnp.float32, element_shape=())
    with pytest.raises(TypeError, match="Input 'indices' of 'TensorArrayGatherV3' Op has type float32"):
        jax.jit(lambda i: ops.TensorArrayGatherV3(state, h, i, flow, jnp.float32))(jnp.array([0.0]))


@pytest.mark.parametrize("mode", MODES)
def test_gather_with_a_traced_element_in_a_list(mode):
    got = run(mode, lambda i: small().unstack(jnp.arange(3.0)).gather([i, 0]), 2)
    np.testing.assert_array_equal(got, [2.0, 0.0])


# -- 64-bit dtypes without x64 ----------------------------------------------------------------

@pytest.mark.parametrize("dtype", [jnp.int64, jnp.uint64, jnp.float64, jnp.complex128])
def test_wide_dtype_without_x64_is_refused(dtype):
    with pytest.raises(ValueError, match="jax_enable_x64"):
        jta.TensorArray(dtype, size=2)
    with pytest.raises(ValueError, match="jax_enable_x64"):
        ops.TensorArrayV3(ops.new_state(), 2, dtype)


def test_wide_dtype_with_x64_stores_exactly():
    with jax.enable_x64(True):
        ta = jta.TensorArray(jnp.int64, size=1).write(0, 2**40)
        assert int(ta.read(0)) == 2**40


# -- unnamed arrays: a registry refuses a second array under a taken name -----------------------

@pytest.mark.parametrize("mode", ["eager", "jit", "disable_jit"])
def test_second_array_under_a_taken_name_is_refused(mode):
    def f():
        a, b = small(), small()
        registry = gradients.read_grad({}, a, 0, 1.0, source="gradients")
        registry = gradients.read_grad(registry, a, 0, 2.0, source="gradients")  # the same array: adds up
        with pytest.raises(ValueError, match="already holds the accumulator for source 'gradients' of another "
                                             "array named 'TensorArray'.*pass tensor_array_name="):
            gradients.read_grad(registry, b, 0, 10.0, source="gradients")
        with pytest.raises(ValueError, match="another array named 'TensorArray'"):
            b.grad("gradients", registry)
        registry = gradients.read_grad(registry, small(tensor_array_name="b"), 0, 10.0, source="gradients")
        return gradients.unstack_grad(registry, a, source="gradients")[1]
    if mode == "disable_jit":
        with jax.disable_jit():
            out = f()
    else:
        out = jax.jit(f)() if mode == "jit" else f()
    np.testing.assert_array_equal(out, [3.0, 0.0, 0.0])


def test_one_array_through_jit_and_scan_keeps_its_accumulator():
    ta = small().unstack(jnp.arange(3.0))
    registry = gradients.read_grad({}, ta, 0, 1.0, source="gradients")
    ta = jax.jit(lambda t: t)(ta)  # the flow survives jit

    def step(reg, i):
        return gradients.read_grad(reg, ta, i, 1.0, source="gradients"), None
    registry, _ = jax.lax.scan(step, registry, jnp.arange(3))
    np.testing.assert_array_equal(gradients.unstack_grad(registry, ta, source="gradients")[1], [2.0, 1.0, 1.0])


# -- checks=False: the gradient is the gradient of what the forward returned ------------------

def test_checks_off_second_write_adds_in_value_and_gradient():
    f = lambda x: small(checks=False).write(0, x).write(0, 2 * x).read(0)  # noqa: E731
    assert float(f(1.0)) == 3.0 and float(jax.grad(f)(1.0)) == 3.0


@pytest.mark.parametrize("op", ["read", "write", "scatter"])
def test_checks_off_out_of_range_traced_index_clamps_in_value_and_gradient(op):
    if op == "read":
        f = lambda x, i: small(checks=False).unstack(jnp.array([1.0, 2.0, 3.0]) * x).read(i)  # noqa: E731
        value, grad = jax.jit(jax.value_and_grad(f))(10.0, -1)
        assert (float(value), float(grad)) == (10.0, 1.0)
    else:
        def f(x, i):
            ta = small(checks=False)
            ta = ta.write(i, x) if op == "write" else ta.scatter(jnp.stack([i]), jnp.stack([x]))
            return ta.stack()
        np.testing.assert_array_equal(jax.jit(f)(5.0, -1), [5.0, 0.0, 0.0])
        np.testing.assert_array_equal(jax.jit(jax.jacrev(f))(5.0, -1), [1.0, 0.0, 0.0])


# -- an empty unstack fixes TF's Python-layer element shape, not the kernel's -------------------

@pytest.mark.parametrize("mode", MODES)
def test_empty_unstack_fixes_only_the_python_layer_shape(mode):
    # Measured in TF 2.21 (graph mode): read(0) raises the kernel's unknown-shape error, a write
    # of another shape raises the Python layer's ValueError, stack() returns zeros of shape (2, 3).
    ta = jta.TensorArray(jnp.float32, size=2).unstack(jnp.zeros((0, 3)))
    assert ta.element_shape == (3,)
    with pytest.raises(jta.errors.InvalidArgumentError, match=r"element shape is not fully defined: <unknown>"):
        run(mode, lambda t: t.read(0), ta)
    with pytest.raises(ValueError, match=r"Inconsistent shapes: saw \(4,\) but expected \(3,\)"):
        run(mode, lambda t: t.write(0, jnp.ones(4)), ta)
    np.testing.assert_array_equal(run(mode, lambda t: t.stack(), ta), np.zeros((2, 3)))
    np.testing.assert_array_equal(run(mode, lambda t: t.write(1, jnp.ones(3)).read(0), ta), np.zeros(3))


# -- writes without element_shape: per-write cost independent of n ----------------------------

def test_eager_growth_is_geometric():
    ta, capacities = jta.TensorArray(jnp.float32, size=0, dynamic_size=True), set()
    for i in range(300):
        ta = ta.write(i, jnp.ones(2))
        capacities.add(ta.capacity)
    assert int(ta.size()) == 300 and ta.stack().shape == (300, 2)
    assert len(capacities) <= 10, capacities  # log2(300) reallocations, not 300


# -- impossible sizes are refused before allocating -------------------------------------------

@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("what, make", [
    ("creating the array", lambda: jta.TensorArray(jnp.float32, size=1000, element_shape=(4,))),
    ("creating the array", lambda: jta.TensorArray(jnp.float32, size=0, dynamic_size=True, capacity=10**6,
                                                   element_shape=())),
    ("creating the array", lambda: ops.TensorArrayV3(ops.new_state(), 1000, jnp.float32, element_shape=(4,))),
    ("creating the array", lambda: jta.TensorArray(jnp.float32, size=10**5)),  # slots form: Python per slot
    ("growing to size 1001", lambda: jta.TensorArray(jnp.float32, size=1, dynamic_size=True, element_shape=(4,))
     .write(1000, jnp.ones(4))),
    ("growing to size 2000", lambda: small().grad("gradients", {})[1].read(1999)),
    ("creating the gradient array", lambda: small().grad("gradients", {}, shape_to_prepend=[10**4])),
    ("fixing the element shape", lambda: jta.TensorArray(jnp.float32, size=500).write(0, jnp.ones(8))),
])
def test_buffers_beyond_the_device_memory_are_refused_before_allocating(monkeypatch, mode, what, make):
    internals.set_memory_limit(monkeypatch, 10_000)
    with pytest.raises(jta.errors.ResourceExhaustedError, match=f"{what} needs .* bytes .* holds at most 10000"):
        jax.jit(make)() if mode == "jit" else make()


def test_sizes_beyond_int32_are_refused():
    with pytest.raises(jta.errors.InvalidArgumentError, match="does not fit TensorFlow's int32 indices"):
        jta.TensorArray(jnp.float32, size=2**31)
    with pytest.raises(jta.errors.InvalidArgumentError, match="does not fit TensorFlow's int32 indices"):
        jta.TensorArray(jnp.float32, size=0, dynamic_size=True).write(2**31, 1.0)


# -- static structure changed inside a loop body: the message names the cause and the fix ------

def _scan(body, ta):
    return jax.lax.scan(lambda t, i: (body(t, i), None), ta, jnp.arange(3))


def _fori(body, ta):
    return jax.lax.fori_loop(0, 3, lambda i, t: body(t, i), ta)


def _while(body, ta):
    return jax.lax.while_loop(lambda c: c[1] < 3, lambda c: (body(c[0], c[1]), c[1] + 1), (ta, 0))


@pytest.mark.parametrize("loop", [_scan, _fori, _while])
@pytest.mark.parametrize("case, make, body, text", [
    ("close", small, lambda t, i: t.write(i, 1.0).close(), r"close\(\) inside a loop body.*close it after the loop"),
    ("no element_shape", lambda: jta.TensorArray(jnp.float32, size=3), lambda t, i: t.write(0, jnp.ones(2)),
     r"element shape not fully defined.*pass a full element_shape="),
    ("dynamic_size", lambda: jta.TensorArray(jnp.float32, size=0, dynamic_size=True, element_shape=()),
     lambda t, i: t.write(3, 1.0), r"dynamic_size without capacity.*pass capacity=N"),
])
def test_structure_change_in_a_loop_names_cause_and_fix(loop, case, make, body, text):
    with pytest.raises(TypeError, match=f"(?s)must have the same pytree structure.*{text}"):
        loop(body, make())


def test_structure_change_fixed_as_the_message_says():
    ta, _ = _scan(lambda t, i: t.write(i, 1.0), small())
    assert ta.stack().tolist() == [1.0, 1.0, 1.0]
    ta.close()
    ta = _fori(lambda t, i: t.write(i, jnp.ones(2)), jta.TensorArray(jnp.float32, size=3, element_shape=(2,)))
    assert ta.stack().shape == (3, 2)
    ta, _ = _while(lambda t, i: t.write(i + 1, 1.0),  # (each slot once: eagerly a second write raises)
                   jta.TensorArray(jnp.float32, size=0, dynamic_size=True, element_shape=(), capacity=4))
    assert int(ta.size()) == 4


# -- shape_to_prepend -------------------------------------------------------------------------

@pytest.mark.parametrize("shape, cls, text", [
    ([-1], jta.errors.InvalidArgumentError, "Dimension -1 must be >= 0"),
    ([2.5], TypeError, "Expected int32 passed to parameter 'shape_to_prepend' of op 'TensorArrayGradWithShape'"),
    (None, ValueError, "Tried to convert 'shape_to_prepend' to a tensor and failed"),
])
def test_bad_shape_to_prepend_is_refused(shape, cls, text):
    with pytest.raises(cls, match=__import__("re").escape(text)):
        small().grad("gradients", {}, shape)
    state, h, flow = ops.TensorArrayV3(ops.new_state(), 2, jnp.float32, element_shape=())
    with pytest.raises(cls, match=__import__("re").escape(text)):
        ops.TensorArrayGradWithShape(state, h, flow, shape, "gradients")


def test_traced_shape_to_prepend_is_refused():
    with pytest.raises(ValueError, match="shape_to_prepend must be static"):
        jax.jit(lambda k: small().grad("gradients", {}, k)[1].stack())(jnp.array([2]))


# -- gradient sources containing '@' ----------------------------------------------------------

def test_source_with_at_sign():
    ta = small().unstack(jnp.arange(3.0))
    _, g, registry = ta.grad("grads@scope", {})
    registry = gradients.put(registry, g.write(1, 4.0))
    _, dvalue = gradients.unstack_grad(registry, ta, source="grads@scope")
    np.testing.assert_array_equal(dvalue, [0.0, 4.0, 0.0])
    state, h, flow = ops.TensorArrayV3(ops.new_state(), 2, jnp.float32, element_shape=())
    state, gh, _ = ops.TensorArrayGradV3(state, h, flow, "a@b")
    state, _ = ops.TensorArrayWriteV3(state, gh, 0, 1.0, flow)
    assert gh == f"{h}@a@b" and float(state[gh].read(0)) == 1.0


# -- bad values, dtypes and sizes -------------------------------------------------------------

@pytest.mark.parametrize("value, cls, text", [
    (None, ValueError, "None values not supported."),
    (object(), TypeError, "Failed to convert elements of <object object at"),
])
def test_bad_values_are_named(value, cls, text):
    with pytest.raises(cls, match=__import__("re").escape(text)):
        small().write(0, value)


def test_python_int_beyond_int64_into_a_float_array():
    assert float(small().write(0, 2**70).read(0)) == np.float32(2**70)


@pytest.mark.parametrize("dtype", [None, object, "not a dtype"])
def test_bad_dtype_is_refused(dtype):
    with pytest.raises(TypeError, match="to a TensorFlow DType"):
        jta.TensorArray(dtype, size=2)


@pytest.mark.parametrize("size, n", [(True, 1), (np.float32(2), 2), (np.int64(3), 3)])
def test_sizes_tensorflow_accepts(size, n):
    assert int(jta.TensorArray(jnp.float32, size=size).size()) == n


# -- x64: a weakly typed float64 argument -------------------------------------------------------

@pytest.mark.parametrize("mode", MODES)
def test_x64_weakly_typed_float_is_written(mode):
    with jax.enable_x64(True):
        np.testing.assert_array_equal(run(mode, lambda v: small().write(0, v).stack(), 1.0), [1.0, 0.0, 0.0])


# -- growth order of multi-index ops, as TensorFlow's kernels do it -----------------------------

def _raw(size, **kw):
    state, h, flow = ops.TensorArrayV3(ops.new_state(), size, jnp.float32, element_shape=(), **kw)
    return state, h, flow


def test_scatter_reports_a_negative_index_with_the_size_before_growing():
    state, h, flow = _raw(0, dynamic_size=True)
    with pytest.raises(jta.errors.InvalidArgumentError, match="index -1 but array is not resizeable and size is: 0" + NOTE + "$"):
        ops.TensorArrayScatterV3(state, h, [-1, 2], jnp.array([1.0, 2.0]), flow)


@pytest.mark.parametrize("mode", MODES)
def test_gradient_gather_grows_in_order_before_failing(mode):
    def f(idx):
        state, h, flow = _raw(2, capacity=4, dynamic_size=True) if mode == "jit" else _raw(2)
        state, flow = ops.TensorArrayScatterV3(state, h, [0, 1], jnp.array([1.0, 2.0]), flow)
        state, gh, gflow = ops.TensorArrayGradWithShape(state, h, flow, [2], "g")
        return ops.TensorArrayGatherV3(state, gh, idx, gflow, jnp.float32, element_shape=(2,))

    with pytest.raises(jta.errors.InvalidArgumentError, match="Tried to read from index -1 but array size is: 4" + NOTE + "$"):
        (jta.checked(jax.jit(f)) if mode == "jit" else f)(jnp.array([3, -1]) if mode == "jit" else [3, -1])


# -- differentiating with respect to a TensorArray --------------------------------------------

def test_cotangent_array_reads_as_the_gradient_of_each_element():
    ta = jta.TensorArray(jnp.float32, size=3, element_shape=(2,)).unstack(jnp.arange(6.0).reshape(3, 2))
    (cot,) = jax.vjp(lambda t: (t.stack() ** 2).sum(), ta)[1](1.0)
    np.testing.assert_array_equal(cot.stack(), 2 * np.arange(6.0).reshape(3, 2))
    np.testing.assert_array_equal(cot.read(1), [4.0, 6.0])
    assert "TensorArray" in repr(cot) and "TensorArray" in cot._repr_html_()
    grad = jax.grad(lambda t: (t.stack() ** 2).sum(), allow_int=True)(ta)
    np.testing.assert_array_equal(grad.gather([0, 2]), [[0.0, 2.0], [8.0, 10.0]])


# -- one meaning per argument in every mode ------------------------------------------------------
def _filled():
    return jta.TensorArray(jnp.float32, size=3, element_shape=()).unstack(jnp.arange(3.0))


def _outcome(fn, *args):
    try:
        return float(fn(*args))
    except jta.errors.InvalidArgumentError as e:
        return str(e).split("\n")[0]


@pytest.mark.parametrize("index", [np.uint32(4294967290), np.int64(2**33), 2**33, True, np.True_, np.int64(2),
                                   np.uint8(1)], ids=repr)
@pytest.mark.parametrize("op", ["read", "write"])
def test_an_index_argument_means_what_it_means_eagerly_in_jta_checked(index, op):
    """jax.jit narrows an int64 past int32 to its low word with x64 off (2**33 would read slot 0) and
    traces a bool as a bool (refused as an index): jta.checked passes such arguments as given, so an
    index reads, writes or fails as it does eagerly, with the same text; a uint32 past 2**31 keeps
    its value in compiled records."""
    def f(i):
        return _filled().read(i) if op == "read" else jta.TensorArray(jnp.float32, size=3).write(i, 1.0).read(1)

    eager = _outcome(f, index)
    assert _outcome(jta.checked(f), index) == eager
    if isinstance(index, np.unsignedinteger):  # traced as it is by jax.jit too
        errors, _ = jax.jit(jta.checkify(f))(index)
        assert (str(errors.exception).split("\n")[0] if errors.exception else None) == (
            eager if isinstance(eager, str) else None)


def test_a_list_of_traced_scalars_is_one_value():
    """TF packs a list holding tensors into one tensor: write(1, [a, b]) with traced a and b."""
    def f(a, b):
        ta = jta.TensorArray(jnp.float32, size=3, element_shape=(2,))
        return ta.write(1, [a, b]).stack()

    for fn in (f, jax.jit(f), jta.checked(f)):
        np.testing.assert_array_equal(fn(np.float32(1.0), np.float32(2.0))[1], [1.0, 2.0])
    stacked = jax.jit(lambda a, b: jta.TensorArray(jnp.float32, size=2, element_shape=(2,)).unstack(
        [[a, b], [b, a]]).stack())(np.float32(1.0), np.float32(2.0))
    np.testing.assert_array_equal(stacked, [[1.0, 2.0], [2.0, 1.0]])


@pytest.mark.rotate("mode")
@pytest.mark.parametrize("dtype", [jnp.int8, jnp.uint8, jnp.int16, jnp.uint16])
@pytest.mark.parametrize("mode", ["eager", "jit", "checked", "loop"])
def test_narrow_index_dtypes_reach_rows_past_their_range(dtype, mode):
    """An index of a dtype narrower than 32 bits into more rows than its dtype counts: compared with the
    size in its own dtype the size wraps (a false range error; XLA wrote past the buffer), so indices are
    widened to int32 first. Reads, writes, gathers, scatters and a loop counter of that dtype."""
    top = int(jnp.iinfo(dtype).max)
    size = 300 if top < 300 else top + 70  # more rows than an index of ``dtype`` can count past its sign
    at = np.asarray([top // 2 + 3, top - 1], dtype)

    def program(at):
        ta = jta.TensorArray(jnp.float32, size=size, element_shape=())
        ta = ta.write(at[0], 1.0).scatter(at[1:], jnp.asarray([2.0]))
        if mode == "loop":
            ta = jax.lax.fori_loop(0, 3, lambda k, t: t.write(at[1] - 2 - k.astype(at.dtype), 3.0 + k), ta)
        return ta.read(at[0]), ta.gather(at), ta.stack()

    run = {"eager": program, "jit": jax.jit(program), "checked": jta.checked(program),
           "loop": jta.checked(program)}[mode]
    one, both, whole = run(jnp.asarray(at))
    assert float(one) == 1.0 and np.asarray(both).tolist() == [1.0, 2.0]
    want = np.zeros(size, np.float32)
    want[int(at[0])], want[int(at[1])] = 1.0, 2.0
    if mode == "loop":
        want[int(at[1]) - 4:int(at[1]) - 1] = [5.0, 4.0, 3.0]
    np.testing.assert_array_equal(np.asarray(whole), want)
