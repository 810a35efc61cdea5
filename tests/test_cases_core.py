"""Spec §8 conformance cases 1–9, 13–25, 29, 32, 36, 42–46, 51–53, 56, 61–67, 77–79.

Every case runs through ``jta.raw_ops`` (mode K, driven by ``RawTA``) and, where it applies,
through ``jta.TensorArray``, in each execution mode of ``tests.helpers.MODES`` (eagerly, under
``jax.jit``, as a ``lax.scan`` body, under ``jax.disable_jit()``). Errors are checked by
class and exact mode-K text. Indices here are Python ints; traced indices are covered by
``test_traced_errors.py`` and ``test_transforms.py``. String dtypes do not exist in JAX and
are left out.
"""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np
import pytest

import jta
from jta import raw_ops as ops
from jta.errors import InvalidArgumentError, NotFoundError, UnimplementedError
from tests.helpers import APIS, MODES, NAMES, RawTA, expect_error, k_text, pytree, run, x64_if

pytestmark = pytest.mark.rotate("mode")  # each case in one mode by default, all under --long

f32 = jnp.float32
NUMERIC = [np.float32, np.float64, np.int32, np.int64, np.complex64, np.complex128]
WITH_BF16 = NUMERIC + [jnp.bfloat16]

api_param = pytest.mark.parametrize("api", list(APIS))
mode_param = pytest.mark.parametrize("mode", MODES)


def dtype_mode_param(dtypes):
    """float32 in every mode; the other dtypes (compile time) eagerly and under jit."""
    return pytest.mark.parametrize(("dtype", "mode"), [
        pytest.param(d, m, id=f"{np.dtype(d).name}-{m}")
        for d in dtypes for m in (MODES if d == np.float32 else ("eager", "jit"))])


def convert(x, dtype):
    """TF's test converter: cast, and give complex values the imaginary part ``-x``."""
    x = np.asarray(x, np.float64)
    if np.dtype(dtype).kind == "c":
        x = x - 1j * x
    return x.astype(dtype)


def assert_same(actual, expected, dtype=None):
    actual = np.asarray(actual)
    np.testing.assert_array_equal(actual.astype(np.float64) if actual.dtype == jnp.bfloat16 else actual,
                                  expected)
    assert actual.shape == np.shape(expected)
    if dtype is not None:
        assert actual.dtype == np.dtype(dtype)


# -- 1-9: writes, reads, stack, concat, unstack, split ----------------------------------------

@mode_param
@api_param
def test_case01_write_read_ragged_elements(api, mode):
    def f(v0, v1, v2):
        ta = APIS[api](f32, 3, tensor_array_name="foo", infer_shape=False)
        ta = ta.write(0, v0).write(1, v1).write(2, v2)
        return ta.read(0), ta.read(1), ta.read(2)

    d0, d1, d2 = run(mode, f, np.float32([[4, 5]]), np.float32([[1]]), np.float32(-3))
    assert_same(d0, [[4.0, 5.0]], f32)
    assert_same(d1, [[1.0]], f32)
    assert_same(d2, -3.0, f32)


@api_param
@dtype_mode_param(NUMERIC)
def test_case02_write_stack_dtypes(api, mode, dtype):
    rows = [[[4.0, 5.0]], [[6.0, 7.0]], [[8.0, 9.0]]]

    def f(v0, v1, v2):
        ta = APIS[api](dtype, 3, tensor_array_name="foo")
        return ta.write(0, v0).write(1, v1).write(2, v2).stack()

    with x64_if(dtype):
        out = run(mode, f, *(convert(r, dtype) for r in rows))
        assert_same(out, convert(rows, dtype), dtype)


@mode_param
@api_param
def test_case03_stack_of_empty_elements(api, mode):
    def f(e):
        return APIS[api](f32, 3, tensor_array_name="foo").write(0, e).write(1, e).write(2, e).stack()

    assert run(mode, f, np.zeros((0, 1), np.float32)).shape == (3, 0, 1)


@api_param
@dtype_mode_param(NUMERIC)
def test_case04_write_concat_ragged_blocks(api, mode, dtype):
    blocks = [[[4.0, 5.0], [104.0, 105.0], [204.0, 205.0]], [[6.0, 7.0], [106.0, 107.0]], [[8.0, 9.0]]]

    def f(b0, b1, b2):
        ta = APIS[api](dtype, 3, tensor_array_name="foo", infer_shape=False)
        return ta.write(0, b0).write(1, b1).write(2, b2).concat()

    with x64_if(dtype):
        out = run(mode, f, *(convert(b, dtype) for b in blocks))
        assert_same(out, convert(sum(blocks, []), dtype), dtype)


@mode_param
@api_param
def test_case05_concat_of_inner_concats_in_a_loop(api, mode):
    # TF runs a while_loop with a cond; the inner results are ragged ([1] vs [8, 9]), so the
    # six iterations are unrolled here.
    make = APIS[api]

    def f(one, eight, nine, empty):
        def concat_1():
            return make(jnp.int32, 2, infer_shape=False).write(0, one).write(1, empty).concat()

        def concat_2():
            return make(jnp.int32, 3, infer_shape=False).write(0, eight).write(1, empty).write(2, nine).concat()

        out = make(jnp.int32, 6, infer_shape=False)
        for i in range(6):
            out = out.write(i, concat_1() if i < 3 else concat_2())
        return out.concat()

    out = run(mode, f, np.int32([1]), np.int32([8]), np.int32([9]), np.zeros((0,), np.int32))
    assert_same(out, [1, 1, 1, 8, 9, 8, 9, 8, 9], jnp.int32)


@mode_param
@api_param
@pytest.mark.parametrize("element_shape", [[1, 2], None], ids=["case06-element_shape", "case07-inferred"])
def test_case06_07_unwritten_slots_read_as_zeros(api, mode, element_shape):
    make = APIS[api]

    def f(v):
        def fresh():
            return make(f32, 3, tensor_array_name="foo", element_shape=element_shape)

        first = fresh().read(0) if element_shape else fresh().write(1, v).read(0)
        return first, fresh().write(1, v).stack(), fresh().write(1, v).concat()

    r0, stacked, concatenated = run(mode, f, np.float32([[4, 5]]))
    assert_same(r0, [[0.0, 0.0]], f32)
    assert_same(stacked, [[[0.0, 0.0]], [[4.0, 5.0]], [[0.0, 0.0]]], f32)
    assert_same(concatenated, [[0.0, 0.0], [4.0, 5.0], [0.0, 0.0]], f32)


@api_param
@dtype_mode_param(WITH_BF16)
def test_case08_unstack_read(api, mode, dtype):
    make = APIS[api]

    def f(vector, matrix, empty):
        out = []
        for value in (vector, matrix, empty):
            ta = make(dtype, 3, tensor_array_name="foo", infer_shape=False).unstack(value)
            out.append([ta.read(0), ta.read(1), ta.read(2)])
        return out

    matrix = [[1.0, 1.1], [2.0, 2.1], [3.0, 3.1]]
    with x64_if(dtype):
        vec, mat, emp = run(mode, f, convert([1.0, 2.0, 3.0], dtype), convert(matrix, dtype),
                            convert(np.zeros((3, 0)), dtype))
        for i in range(3):
            assert_same(vec[i], convert(i + 1.0, dtype), dtype)
            assert_same(mat[i], convert(matrix[i], dtype), dtype)
            assert_same(emp[i], convert(np.zeros((0,)), dtype), dtype)


@api_param
@dtype_mode_param(WITH_BF16)
def test_case09_split_read(api, mode, dtype):
    make = APIS[api]

    def f(empty, vector, matrix):
        out = []
        for value, lengths in ((empty, [0, 0, 0]), (vector, [2, 0, 1]), (matrix, [2, 0, 1])):
            ta = make(dtype, 3, tensor_array_name="foo", infer_shape=False).split(value, lengths)
            out.append([ta.read(0), ta.read(1), ta.read(2)])
        return out

    with x64_if(dtype):
        emp, vec, mat = run(mode, f, convert(np.zeros((0,)), dtype), convert([1.0, 2.0, 3.0], dtype),
                            convert([[1.0, 101.0], [2.0, 201.0], [3.0, 301.0]], dtype))
        for i in range(3):
            assert_same(emp[i], convert(np.zeros((0,)), dtype), dtype)
        assert_same(vec[0], convert([1.0, 2.0], dtype), dtype)
        assert_same(vec[1], convert(np.zeros((0,)), dtype), dtype)
        assert_same(vec[2], convert([3.0], dtype), dtype)
        assert_same(mat[0], convert([[1.0, 101.0], [2.0, 201.0]], dtype), dtype)
        assert_same(mat[1], convert(np.zeros((0, 2)), dtype), dtype)
        assert_same(mat[2], convert([[3.0, 301.0]], dtype), dtype)


# -- 13-25: errors -----------------------------------------------------------------------------

def _ta(make, size=3, **kw):
    kw.setdefault("infer_shape", False)  # TF's _make_ta
    return make(f32, size, tensor_array_name="foo", **kw)


ERROR_CASES = {
    # id: (build(make, value) -> array, error class, K text with NAME for the runtime name)
    "13-write-string": (lambda make, v: _ta(make).write(0, "wrong_type_scalar"), InvalidArgumentError,
                        "TensorArray dtype is float but Op is trying to write dtype string."),
    "13-write-int32": (lambda make, v: _ta(make).write(0, jnp.asarray(v, jnp.int32)), InvalidArgumentError,
                       "TensorArray dtype is float but Op is trying to write dtype int32."),
    "14-write-negative": (lambda make, v: _ta(make).write(-1, v), InvalidArgumentError,
                          "TensorArray NAME: Tried to write to index -1 but array is not resizeable and size is: 3"),
    "14-write-negative-dynamic": (
        lambda make, v: _ta(make, 0, dynamic_size=True).write(-1, v), InvalidArgumentError,
        "TensorArray NAME: Tried to write to index -1 but array is not resizeable and size is: 0"),
    "15-write-past-end": (lambda make, v: _ta(make).write(3, v), InvalidArgumentError,
                          "TensorArray NAME: Tried to write to index 3 but array is not resizeable and size is: 3"),
    "17-read-negative": (lambda make, v: _ta(make).write(0, v).read(-1), InvalidArgumentError,
                         "Tried to read from index -1 but array size is: 3"),
    "18-read-past-end": (lambda make, v: _ta(make).write(0, v).read(3), InvalidArgumentError,
                         "Tried to read from index 3 but array size is: 3"),
    "19-write-twice": (lambda make, v: _ta(make, infer_shape=True).write(2, v).write(2, v), InvalidArgumentError,
                       "TensorArray NAME: Could not write to TensorArray index 2 because it has already been "
                       "written to."),
    "19-write-twice-unknown-shape": (
        lambda make, v: _ta(make).write(2, v).write(2, v), InvalidArgumentError,
        "TensorArray NAME: Could not write to TensorArray index 2 because it has already been written to."),
    "20-concat-scalars": (lambda make, v: _ta(make).write(0, v).write(1, v + 1).write(2, v[None]).concat(),
                          InvalidArgumentError,
                          "Concat saw a scalar shape at index 0 but requires at least vectors.  Did you mean to "
                          "call pack?"),
    "21-concat-ranks-differ": (
        lambda make, v: _ta(make).write(0, v[None]).write(1, v[None]).write(2, v[None, None]).concat(),
        InvalidArgumentError,
        "TensorArray has inconsistent shapes.  Index 0 has (excepting dimension 0) shape: [] but index 2 has "
        "(excepting dimension 0) shape: [1]"),
    "22-split-scalar-lengths": (lambda make, v: _ta(make).split(v * np.float32([1, 2, 3]), 1), InvalidArgumentError,
                                "Expected lengths to be a vector, received shape: []"),
    "23-split-lengths-sum": (lambda make, v: _ta(make).split(v * np.float32([1, 2, 3]), [1]), InvalidArgumentError,
                             "Expected sum of lengths to be equal to values.shape[0], but sum of lengths is 1 and "
                             "value's shape is: [3]"),
    "24-split-scalar-value": (lambda make, v: _ta(make, 1).split(v, [1]), InvalidArgumentError,
                              "Expected value to be at least a vector, but received shape: []"),
    "25-split-size-mismatch": (lambda make, v: _ta(make, 2).split(v[None], [1]), InvalidArgumentError,
                               "TensorArray's size is not equal to the size of lengths (2 vs. 1), and the "
                               "TensorArray is not marked as dynamically resizeable"),
    "52-stack-size-zero-unknown-shape": (
        lambda make, v: _ta(make, 0).stack(), UnimplementedError,
        "TensorArray has size zero, but element shape <unknown> is not fully defined. Currently only static "
        "shapes are supported when packing zero-size TensorArrays."),
    "65-stack-size-zero-partial-shape": (
        lambda make, v: _ta(make, 0, dynamic_size=True, element_shape=(5, None)).stack(), UnimplementedError,
        "TensorArray has size zero, but element shape [5,?] is not fully defined. Currently only static "
        "shapes are supported when packing zero-size TensorArrays."),
    "77-read-after-close": (lambda make, v: _ta(make).write(0, v).close().read(0), InvalidArgumentError,
                            "TensorArray NAME has already been closed."),
    "77-write-after-close": (lambda make, v: _ta(make).write(0, v).close().write(1, v), InvalidArgumentError,
                             "TensorArray NAME has already been closed."),
    "77-stack-after-close": (lambda make, v: _ta(make, infer_shape=True).write(0, v).close().stack(),
                             InvalidArgumentError, "TensorArray NAME has already been closed."),
    "77-size-after-close": (lambda make, v: _ta(make).close().size(), InvalidArgumentError,
                            "TensorArray NAME has already been closed."),
    "78-scatter-duplicate-index": (
        lambda make, v: _ta(make, infer_shape=True).scatter([1, 0, 0], v * np.ones((3, 2), np.float32)),
        InvalidArgumentError,
        "TensorArray NAME: Could not write to TensorArray index 0 because it has already been written to."),
    "78-scatter-duplicate-index-unknown-shape": (
        lambda make, v: _ta(make).scatter([1, 0, 0], v * np.ones((3, 2), np.float32)), InvalidArgumentError,
        "TensorArray NAME: Could not write to TensorArray index 0 because it has already been written to."),
    "78-scatter-past-end": (lambda make, v: _ta(make).scatter([5], v * np.ones((1, 2), np.float32)),
                            InvalidArgumentError, "Max scatter index must be < array size (5 vs. 3)"),
    "78-scatter-negative": (
        lambda make, v: _ta(make).scatter([-1], v * np.ones((1, 2), np.float32)), InvalidArgumentError,
        "TensorArray NAME: Tried to write to index -1 but array is not resizeable and size is: 3"),
    "78-unstack-too-many": (lambda make, v: _ta(make).unstack(v * np.ones((4, 2), np.float32)),
                            InvalidArgumentError, "Max scatter index must be < array size (3 vs. 3)"),
    "78-scatter-count-mismatch": (
        lambda make, v: _ta(make).scatter([0, 1], v * np.ones((3, 2), np.float32)), InvalidArgumentError,
        "Expected len(indices) == values.shape[0], but saw: 2 vs. 3"),
}


@mode_param
@api_param
@pytest.mark.parametrize("case", list(ERROR_CASES))
def test_error_cases(api, mode, case):
    build, cls, text = ERROR_CASES[case]
    expect_error(mode, lambda v: build(APIS[api], v), cls, k_text(text, NAMES[api]), np.float32(3))


@mode_param
@pytest.mark.parametrize(("op", "dtype", "text"), [
    ("read", jnp.float64, "TensorArray dtype is float but Op requested dtype double."),
    ("gather", jnp.int32, "TensorArray dtype is float but Op requested dtype int32."),
    ("concat", jnp.int64, "TensorArray dtype is float but Op requested dtype int64."),
])
def test_case16_raw_op_requests_wrong_dtype(mode, op, dtype, text):
    def f(v):
        s, h, flow = ops.TensorArrayV3(ops.new_state(), 3, f32, tensor_array_name="foo")
        s, flow = ops.TensorArrayWriteV3(s, h, 0, v, flow)
        if op == "read":
            return ops.TensorArrayReadV3(s, h, 0, flow, dtype)
        if op == "gather":
            return ops.TensorArrayGatherV3(s, h, np.int32([0]), flow, dtype)
        return ops.TensorArrayConcatV3(s, h, flow, dtype)

    with x64_if(np.float64), pytest.raises(InvalidArgumentError, match=k_text(text)):
        run(mode, f, np.float32([1, 2]))


# -- 29, 32, 36 ------------------------------------------------------------------------------

@mode_param
@api_param
def test_case29_two_named_arrays(api, mode):
    def f(a, b):
        foo = APIS[api](f32, 1, tensor_array_name="foo").write(0, a)
        bar = APIS[api](f32, 1, tensor_array_name="bar").write(0, b)
        return foo.read(0) + bar.read(0)

    assert_same(run(mode, f, np.float32(4), np.float32(5)), 9.0, f32)


@mode_param
def test_case29_raw_arrays_in_one_state_get_distinct_handles(mode):
    def f(a, b, c):
        s = ops.new_state()
        s, foo, flow_foo = ops.TensorArrayV3(s, 1, f32, tensor_array_name="foo")
        s, bar, flow_bar = ops.TensorArrayV3(s, 1, f32, tensor_array_name="bar")
        s, foo2, flow_foo2 = ops.TensorArrayV3(s, 1, f32, tensor_array_name="foo")  # the same name again
        assert len({foo, bar, foo2}) == 3
        assert foo.startswith("foo_") and bar.startswith("bar_") and foo2.startswith("foo_")
        s, flow_foo = ops.TensorArrayWriteV3(s, foo, 0, a, flow_foo)
        s, flow_bar = ops.TensorArrayWriteV3(s, bar, 0, b, flow_bar)
        s, flow_foo2 = ops.TensorArrayWriteV3(s, foo2, 0, c, flow_foo2)
        s, r1 = ops.TensorArrayReadV3(s, foo, 0, flow_foo, f32)
        s, r2 = ops.TensorArrayReadV3(s, bar, 0, flow_bar, f32)
        s, r3 = ops.TensorArrayReadV3(s, foo2, 0, flow_foo2, f32)
        return r1 + r2, r3

    total, other = run(mode, f, np.float32(4), np.float32(5), np.float32(7))
    assert_same(total, 9.0, f32)
    assert_same(other, 7.0, f32)


@mode_param
def test_case32_raw_read_twice_after_clear(mode):
    value = np.float32([[1, -1], [10, -10]])

    def read_twice(clear_after_read):
        def f(v):
            ta = RawTA(f32, 2, tensor_array_name="foo", clear_after_read=clear_after_read).unstack(v)
            return ta.read(0), ta.read(0), ta.state
        return f

    expect_error(mode, lambda v: read_twice(True)(v)[2], InvalidArgumentError,
                 k_text("TensorArray NAME: Could not read index 0 twice because it was cleared after a previous "
                        "read (perhaps try setting clear_after_read = false?)."), value)
    first, second, state = run(mode, read_twice(False), value)
    jta.throw(state)
    assert_same(first, [1.0, -1.0], f32)
    assert_same(second, [1.0, -1.0], f32)


@mode_param
def test_case32_tensor_array_read_does_not_clear(mode):
    # README: jta.TensorArray.read returns only the value, so it cannot clear a slot.
    def f(v):
        ta = jta.TensorArray(f32, 2, tensor_array_name="foo").unstack(v)
        return ta.read(0), ta.read(0), ta

    first, second, ta = run(mode, f, np.float32([[1, -1], [10, -10]]))
    jta.throw(ta)
    assert_same(first, [1.0, -1.0])
    assert_same(second, [1.0, -1.0])


@mode_param
@api_param
def test_case36_close_and_size(api, mode):
    make = APIS[api]

    def f(v0, v1):
        closed_fresh = make(f32, 3, tensor_array_name="foo").close()
        size = make(f32, 3, tensor_array_name="foo").size()
        ta = make(f32, 3, tensor_array_name="foo", infer_shape=False).write(0, v0).write(1, v1)
        return pytree(closed_fresh), size, pytree(ta.close())

    closed_fresh, size, closed_written = run(mode, f, np.float32([[4, 5]]), np.float32([3]))
    jta.throw([closed_fresh, closed_written])
    assert_same(size, 3, jnp.int32)


# -- 42-46: static shape inference --------------------------------------------------------------

def _shape_error(api, index, saw, expected_py, expected_k):
    """TF's Python layer (jta.TensorArray) raises ValueError; the raw kernel InvalidArgument."""
    if api == "ta":
        return ValueError, k_text(f"Inconsistent shapes: saw {saw} but expected {expected_py} ")
    return InvalidArgumentError, k_text(
        f"TensorArray NAME: Could not write to TensorArray index {index} because the value shape is {expected_k[0]} "
        f"which is incompatible with the TensorArray's inferred element shape: {expected_k[1]} "
        "(consider setting infer_shape=False).")


@mode_param
@api_param
def test_case42_write_shape_is_inferred(api, mode):
    make = APIS[api]

    def f(c0):
        return make(f32, 3, tensor_array_name="foo").write(0, c0).read(0)

    assert run(mode, f, np.float32([4, 5])).shape == (2,)
    cls, pattern = _shape_error(api, 1, "(3,)", "(2,)", ("[3]", "[2]"))
    expect_error(mode, lambda c0, c2: make(f32, 3, tensor_array_name="foo").write(0, c0).write(1, c2),
                 cls, pattern, np.float32([4, 5]), np.float32([4, 5, 6]))


@mode_param
@api_param
def test_case43_partially_known_shapes_are_refined(api, mode):
    make = APIS[api]
    es = [None, None, None, 3]

    def f(c0, c4, c5):
        ta = make(f32, 6, tensor_array_name="foo", element_shape=es)
        declared = ta.element_shape
        ta = ta.write(0, c0)
        written, r0 = ta.element_shape, ta.read(0)
        scattered = make(f32, 6, tensor_array_name="foo", element_shape=[None, 4, 2, 3]).scatter([4, 5], c4)
        split = make(f32, 2, tensor_array_name="foo", element_shape=es).split(c5, [5, 5])
        assert declared == (None, None, None, 3)
        assert written == (1, 1, 2, 3)
        assert scattered.element_shape == (5, 4, 2, 3)
        assert split.element_shape == (5, 4, 2, 3)
        return r0, scattered.read(4), split.read(1)

    r0, r4, r5 = run(mode, f, np.ones((1, 1, 2, 3), np.float32), np.ones((2, 5, 4, 2, 3), np.float32),
                     np.ones((10, 4, 2, 3), np.float32))
    assert (r0.shape, r4.shape, r5.shape) == ((1, 1, 2, 3), (5, 4, 2, 3), (5, 4, 2, 3))
    cls, pattern = _shape_error(api, 0, "(1, 1, 1, 4)", "(None, None, None, 3)", ("[1,1,1,4]", "[?,?,?,3]"))
    expect_error(mode, lambda c: make(f32, 6, tensor_array_name="foo", element_shape=es).write(0, c),
                 cls, pattern, np.ones((1, 1, 1, 4), np.float32))


@mode_param
@api_param
def test_case44_unstack_into_dynamic_array(api, mode):
    make = APIS[api]

    def f(value, c1):
        ta = make(f32, 0, tensor_array_name="foo", dynamic_size=True).unstack(value)
        r0 = ta.read(0)
        ta = ta.write(3, c1)
        return r0, ta.read(1), ta.size(), ta.read(3)

    value = np.float32([[1, -1], [10, -10], [100, -100]])
    r0, r1, size, r3 = run(mode, f, value, np.float32([4, 5]))
    assert r0.shape == r1.shape == (2,)
    assert_same(r1, [10.0, -10.0])
    assert_same(r3, [4.0, 5.0])
    assert_same(size, 4, jnp.int32)
    cls, pattern = _shape_error(api, 4, "(3,)", "(2,)", ("[3]", "[2]"))
    expect_error(mode, lambda v, c: make(f32, 0, tensor_array_name="foo", dynamic_size=True).unstack(v).write(4, c),
                 cls, pattern, value, np.float32([4, 5, 6]))
    if api == "raw":  # K only: the first read of index 0 cleared it
        def read_again(v, c1):
            ta = make(f32, 0, tensor_array_name="foo", dynamic_size=True).unstack(v)
            ta.read(0)
            ta = ta.write(3, c1)
            ta.read(0)
            return ta
        expect_error(mode, read_again, InvalidArgumentError,
                     k_text("TensorArray NAME: Could not read index 0 twice because it was cleared after a "
                            "previous read (perhaps try setting clear_after_read = false?)."),
                     value, np.float32([4, 5]))


@mode_param
@api_param
def test_case45_split_into_dynamic_array(api, mode):
    make = APIS[api]
    value = np.float32([[1, -1], [2, -2], [3, -3]])

    def f(v):
        equal = make(f32, 0, tensor_array_name="foo", dynamic_size=True).split(v, [1, 1, 1])
        ragged = make(f32, 0, tensor_array_name="foo1", dynamic_size=True, infer_shape=False).split(v, [1, 2])
        return equal.read(0), ragged.read(0), ragged.read(1), equal.size(), ragged.size()

    r0, q0, q1, n_equal, n_ragged = run(mode, f, value)
    assert (r0.shape, q0.shape, q1.shape) == ((1, 2), (1, 2), (2, 2))
    assert_same(q1, value[1:])
    assert (int(n_equal), int(n_ragged)) == (3, 2)
    # With infer_shape (identical_element_shapes in the kernel) the first piece pins the element
    # shape, so ragged pieces fail at run time in K [verified against TF 2.21].
    expect_error(mode, lambda v: make(f32, 0, tensor_array_name="foo1", dynamic_size=True).split(v, [1, 2]),
                 InvalidArgumentError,
                 k_text("TensorArray NAME: Could not write to TensorArray index 1 because the value shape is [2,2] "
                        "which is incompatible with the TensorArray's inferred element shape: [1,2] (consider "
                        "setting infer_shape=False).", NAMES[api].replace("foo", "foo1")), value)


@mode_param
@api_param
def test_case46_no_inference_without_infer_shape(api, mode):
    # JAX values always have a concrete shape; the nearest analogue of writing an unknown shape
    # is an array that does not infer: its element shape stays unknown after a write.
    def f(v):
        ta = APIS[api](f32, 3, tensor_array_name="foo", infer_shape=False).write(0, v)
        assert ta.element_shape is None
        return ta.read(0)

    assert run(mode, f, np.ones((2, 3), np.float32)).shape == (2, 3)


# -- 51-53, 56: static shapes of stack/gather, empty arrays, scatter ---------------------------

@mode_param
@api_param
def test_case51_stack_read_gather_shapes(api, mode):
    def f(x, indices):
        ta = APIS[api](f32, 3, clear_after_read=False).write(0, x)
        return ta.stack(), ta.read(0), ta.gather(indices)

    stacked, r0, gathered = run(mode, f, np.float32([1, 2, 3]), np.int32([0]))
    assert (stacked.shape, r0.shape, gathered.shape) == ((3, 3), (3,), (1, 3))
    assert_same(stacked, [[1.0, 2.0, 3.0], [0, 0, 0], [0, 0, 0]])
    assert_same(gathered, [[1.0, 2.0, 3.0]])


@mode_param
def test_case53_tensor_array_empty_unstack_sets_the_shape(mode):
    def f(zeros):
        ta = jta.TensorArray(f32, 0).unstack(zeros)
        assert ta.element_shape == (3, 5)
        return ta.stack(), ta.concat()

    packed, concatenated = run(mode, f, np.zeros((0, 3, 5), np.float32))
    assert (packed.shape, concatenated.shape) == ((0, 3, 5), (0, 5))


@mode_param
def test_case53_raw_empty_arrays_need_the_shape_attribute(mode):
    empty = np.zeros((0,), np.int32)

    def f(zeros):
        s, h, flow = ops.TensorArrayV3(ops.new_state(), 0, f32, identical_element_shapes=True)
        s, flow = ops.TensorArrayScatterV3(s, h, empty, zeros, flow)
        s, packed = ops.TensorArrayGatherV3(s, h, empty, flow, f32, element_shape=[3, 5])
        s, concatenated, lengths = ops.TensorArrayConcatV3(s, h, flow, f32, element_shape_except0=[5])
        return packed, concatenated, lengths

    packed, concatenated, lengths = run(mode, f, np.zeros((0, 3, 5), np.float32))
    assert (packed.shape, concatenated.shape, lengths.shape) == ((0, 3, 5), (0, 5), (0,))

    def without_attr(op):
        def g(zeros):
            s, h, flow = ops.TensorArrayV3(ops.new_state(), 0, f32, identical_element_shapes=True)
            s, flow = ops.TensorArrayScatterV3(s, h, empty, zeros, flow)
            if op == "gather":
                return ops.TensorArrayGatherV3(s, h, empty, flow, f32)
            return ops.TensorArrayConcatV3(s, h, flow, f32)
        return g

    with pytest.raises(UnimplementedError, match=k_text(
            "TensorArray has size zero, but element shape <unknown> is not fully defined. Currently only static "
            "shapes are supported when packing zero-size TensorArrays.")):
        run(mode, without_attr("gather"), np.zeros((0, 3, 5), np.float32))
    with pytest.raises(UnimplementedError, match=k_text(
            "TensorArray has size zero, but element_shape_except0 <unknown> is not fully defined. Currently only "
            "static shapes are supported when concatenating zero-size TensorArrays.")):
        run(mode, without_attr("concat"), np.zeros((0, 3, 5), np.float32))


@mode_param
@api_param
def test_case56_scatter_into_existing_array(api, mode):
    def f(ones2, ones1, five_six):
        # In K each stack is a separate run replaying the scatters (a stack marks slots read).
        def after(n):
            ta = APIS[api](f32, 5, tensor_array_name="foo")
            for indices, value in [([3, 4], ones2), ([1], ones1), ([0, 2], five_six)][:n]:
                ta = ta.scatter(indices, value)
            return ta.stack()
        return after(1), after(2), after(3)

    s1, s2, s3 = run(mode, f, np.ones(2, np.float32), np.ones(1, np.float32), np.float32([5, 6]))
    assert_same(s1, [0.0, 0.0, 0.0, 1.0, 1.0])
    assert_same(s2, [0.0, 1.0, 0.0, 1.0, 1.0])
    assert_same(s3, [5.0, 1.0, 6.0, 1.0, 1.0])


# -- 61-66: declared element shapes --------------------------------------------------------------

@mode_param
@api_param
def test_case61_partial_element_shape_concat(api, mode):
    def f(a, b):
        ta = APIS[api](f32, 3, tensor_array_name="foo", infer_shape=False, element_shape=[None, 10, 20])
        return ta.write(0, a).write(1, a).write(2, b).concat()

    out = run(mode, f, np.ones((50, 10, 20), np.float32), np.ones((1, 10, 20), np.float32))
    assert_same(out, np.ones((101, 10, 20)), f32)


@mode_param
@api_param
def test_case62_write_incompatible_with_declared_shape(api, mode):
    cls, pattern = _shape_error(api, 0, "(1, 20, 20)", "(None, 10, 20)", ("[1,20,20]", "[?,10,20]"))
    expect_error(mode, lambda v: APIS[api](f32, 2, tensor_array_name="foo", infer_shape=False,
                                           element_shape=[None, 10, 20]).write(0, v),
                 cls, pattern, np.ones((1, 20, 20), np.float32))


@mode_param
@api_param
def test_case63_first_write_pins_a_partial_shape(api, mode):
    make = APIS[api]

    def f(a):
        ta = make(f32, 3, tensor_array_name="foo", element_shape=[None, 10, 20])
        assert ta.element_shape == (None, 10, 20)
        ta = ta.write(0, a)
        assert ta.element_shape == (50, 10, 20)
        return ta.read(0)

    assert run(mode, f, np.ones((50, 10, 20), np.float32)).shape == (50, 10, 20)
    cls, pattern = _shape_error(api, 1, "(1, 10, 20)", "(50, 10, 20)", ("[1,10,20]", "[50,10,20]"))
    expect_error(mode, lambda a, b: make(f32, 3, tensor_array_name="foo", element_shape=[None, 10, 20])
                 .write(0, a).write(1, b), cls, pattern,
                 np.ones((50, 10, 20), np.float32), np.ones((1, 10, 20), np.float32))


@mode_param
@api_param
@pytest.mark.parametrize(("size", "dynamic", "element_shape", "write", "expected"), [
    (0, True, (5, 10), False, (0, 5, 10)),  # case 64
    (42, False, None, True, (42, 1)),  # case 66
], ids=["case64", "case66"])
def test_case64_66_stack_shapes(api, mode, size, dynamic, element_shape, write, expected):
    def f(v):
        ta = APIS[api](f32, size, dynamic_size=dynamic, element_shape=element_shape)
        return (ta.write(0, v) if write else ta).stack()

    out = run(mode, f, np.float32([0]))
    assert out.shape == expected
    assert_same(out, np.zeros(expected))


# -- 67, 77-79: raw-op specifics ---------------------------------------------------------------

RAW_OPS_ON_HANDLE = {
    "read": lambda s, h: ops.TensorArrayReadV3(s, h, 0, 0.0, f32),
    "write": lambda s, h: ops.TensorArrayWriteV3(s, h, 0, 1.0, 0.0),
    "gather": lambda s, h: ops.TensorArrayGatherV3(s, h, np.int32([0]), 0.0, f32),
    "scatter": lambda s, h: ops.TensorArrayScatterV3(s, h, np.int32([0]), np.float32([1]), 0.0),
    "concat": lambda s, h: ops.TensorArrayConcatV3(s, h, 0.0, f32),
    "split": lambda s, h: ops.TensorArraySplitV3(s, h, np.float32([1, 2, 3]), np.int64([1, 1, 1]), 0.0),
    "size": lambda s, h: ops.TensorArraySizeV3(s, h, 0.0),
    "close": lambda s, h: ops.TensorArrayCloseV3(s, h),
    "grad": lambda s, h: ops.TensorArrayGradV3(s, h, 0.0, "grad"),
}


@mode_param
@pytest.mark.parametrize("op", list(RAW_OPS_ON_HANDLE))
def test_case67_unknown_handle_is_not_found(mode, op):
    def f(x):
        s, _, _ = ops.TensorArrayV3(ops.new_state(), 3, f32, tensor_array_name="a")
        return RAW_OPS_ON_HANDLE[op](s, "b")

    with pytest.raises(NotFoundError, match=r"Container .* does not exist"):
        run(mode, f, np.float32(0))


@mode_param
@pytest.mark.parametrize("op", [op for op in RAW_OPS_ON_HANDLE if op != "close"])
def test_case77_raw_ops_after_close(mode, op):
    def f(x):
        s, h, flow = ops.TensorArrayV3(ops.new_state(), 3, f32, tensor_array_name="foo")
        s, flow = ops.TensorArrayWriteV3(s, h, 0, x, flow)
        s = ops.TensorArrayCloseV3(s, h)
        return RAW_OPS_ON_HANDLE[op](s, h)

    with pytest.raises(InvalidArgumentError, match=k_text("TensorArray NAME has already been closed.")):
        run(mode, f, np.float32(1))


@mode_param
@api_param
def test_case77_second_close_succeeds(api, mode):
    def f(x):
        return pytree(APIS[api](f32, 3, tensor_array_name="foo").write(0, x).close().close())

    jta.throw(run(mode, f, np.float32(1)))


@mode_param
def test_case79_raw_write_after_zero_read(mode):
    def read(v):
        ta = RawTA(f32, 3, tensor_array_name="foo", element_shape=[2])
        return ta.read(1), ta

    def read_then_write(v):
        _, ta = read(v)
        return ta.write(1, v)

    zeros, state = run(mode, lambda v: (read(v)[0], read(v)[1].state), np.float32([1, 2]))
    jta.throw(state)
    assert_same(zeros, [0.0, 0.0], f32)
    expect_error(mode, read_then_write, InvalidArgumentError,
                 k_text("TensorArray NAME: Could not write to TensorArray index 1 because it has already been read."),
                 np.float32([1, 2]))
