"""Spec §8 conformance cases on live TensorFlow and on jta, side by side.

Every case of ``../shared/tf-tensorarray-spec.md`` §8 is one parametrization of
:func:`test_case` (``test_case[26]``). A case runs its program on TensorFlow and on jta and
compares **values** (exact for integers, 1e-6 for floats), **dtypes**, **shapes** (TF's static
shape, partial in graphs, must be compatible with jta's), **gradients**, and **errors** (class
name — ``tf.errors.InvalidArgumentError`` ↔ ``jta.errors.InvalidArgumentError``, ``ValueError``
↔ ``ValueError``, ... — and message text). Where TF and the spec disagree, TF is the reference.

How the two sides meet (runners in ``_tf_cases.py``):

* ``jta.TensorArray`` against ``tf.TensorArray`` in mode **K** (a ``tf.compat.v1`` graph with
  control flow v1, run by a ``Session``) and, where the case says those modes hold, **E**
  (eagerly) and **L** (``tf.function``). jta's errors are K's everywhere (README), so errors are
  compared with K only; E/L error texts are checked against the spec's §5.3 cells.
* ``jta.raw_ops`` (``tests.helpers.RawTA``, ``tests.helpers.Raw``) and ``jta.gradients`` (``tests.helpers.Rules``)
  against the ``tf.raw_ops`` V3 kernels called eagerly in program order (mode K).
* gradient cases [G]: ``tf.gradients`` in a K graph (and ``tf.GradientTape`` in E/L where the
  case lists them) against ``jax.vjp`` and TF's backward graph replayed through jta (the
  programs of ``test_gradients_cases.CASES``: raw-op accumulators and ``jta.gradients``).

Messages are normalised on both sides (``_tf_cases.normalise``): TF's eager-op wrapper
(``{{function_node ...}}``, `` [Op:TensorArrayWriteV3] name: ``) and graph-execution frame
(``Graph execution error: ... [[{{node ...}}]]``) are dropped, and runtime array names lose
their counter (TF's process-wide ``foo_17``, jta raw ops' per-state ``foo_0``, and
``jta.TensorArray``'s ``foo`` all read ``foo``).

Cases TensorFlow cannot run here, and the three TF crashes (H1-H3: never run on TF, they kill
the process), are ``-spec`` parametrizations checked against the spec's recorded expectation,
each with its reason. Strings (cases 2, 4, 8, 13): JAX has no string dtype, so only the
non-string parts run (writing a string is still an error in both).
"""

from __future__ import annotations

import types
from collections.abc import Callable

import jax
import jax.numpy as jnp
import numpy as np
import pytest

tf = pytest.importorskip("tensorflow")

from tensorflow.python.ops import tensor_array_grad  # noqa: E402
from tensorflow.python.ops.parallel_for import gradients as pfor_gradients  # noqa: E402

import jta  # noqa: E402
from jta import gradients  # noqa: E402
from jta import raw_ops as ops  # noqa: E402
from tests import test_gradients_cases  # noqa: E402  (jta's programs for the gradient cases)
from tests.helpers import BACKENDS, Raw, RawTA, Rules, assert_close, k_graph, x64_if  # noqa: E402
from tests.oracle._tf_cases import (  # noqa: E402
    JTA_MAKE,
    TF_RUNNERS,
    Tensor,
    TfRaw,
    Unknown,
    assert_agree,
    normalise,
    run_e,
    run_jta,
    run_k,
    run_l,
    run_program,
    run_tf_raw,
    shape_str,
    tf_make,
)

f32, i32 = np.float32, np.int32
NUMERIC = [np.float32, np.float64, np.int32, np.int64, np.complex64, np.complex128]
WITH_BF16 = NUMERIC + [jnp.bfloat16]


def convert(x, dtype):
    """TF's test converter: cast, and give complex values the imaginary part ``-x``."""
    x = np.asarray(x, np.float64)
    if np.dtype(dtype).kind == "c":
        x = x - 1j * x
    return x.astype(dtype)


# -- comparisons --------------------------------------------------------------------------------------

def compare(body, *args, modes=("K", "E", "L", "raw"), label=""):
    """Run ``body`` on TF in each of ``modes`` and on the matching jta API; they must agree.
    Returns the TF outcomes by mode."""
    mine, tfs = {}, {}
    for mode in modes:
        make = JTA_MAKE[mode]
        if make not in mine:
            mine[make] = run_jta(body, *args, make=make)
        tfs[mode] = TF_RUNNERS[mode](body, *args)
        assert_agree(tfs[mode], mine[make], f"{label} mode {mode}")
    return tfs


def tf_says(mode, body, *args, error=None, values=None):
    """TensorFlow alone, against the spec's recorded E/L cell (``error=(class, text)`` or values)."""
    got = TF_RUNNERS[mode](body, *args)
    if error is not None:
        assert got.error == (error[0], normalise(error[1])), (mode, got.error, error)
    else:
        assert got.error is None, (mode, got.error)
        for v, want in zip(got.values(), values, strict=True):
            np.testing.assert_array_equal(v, want)
    return got


def compare_program(program, *args, backends=("raw", "ta")):
    """A handle program on the live kernels (``TfRaw``) and on jta's raw ops / ``jta.gradients``."""
    want = run_program(program, TfRaw, *args)
    for api in backends:
        assert_agree(want, run_program(program, BACKENDS[api], *args), f"backend {api}")
    return want


def ta_(make, size=3, **kw):
    """TF's ``_make_ta`` in tensor_array_ops_test.py: float32, named foo, no shape inference."""
    kw.setdefault("infer_shape", False)
    return make(f32, size, tensor_array_name="foo", **kw)


# -- the case registry --------------------------------------------------------------------------------

CASES: dict[str, Callable[[], None]] = {}
SPEC_ONLY: dict[str, str] = {}  # id -> why TensorFlow is not run


def case(n, spec_only: str | None = None):
    def register(fn):
        key = f"{n}-spec" if spec_only else str(n)
        CASES[key] = fn
        if spec_only:
            SPEC_ONLY[key] = spec_only
        return fn
    return register


# -- 1-9: writes, reads, stack, concat, unstack, split ------------------------------------------------

@case(1)
def _case01():
    def body(make, v0, v1, v2):
        ta = make(f32, 3, tensor_array_name="foo", infer_shape=False).write(0, v0).write(1, v1).write(2, v2)
        return ta.read(0), ta.read(1), ta.read(2)

    compare(body, f32([[4, 5]]), f32([[1]]), f32(-3))


@case(2)
def _case02():
    rows = [[[4.0, 5.0]], [[6.0, 7.0]], [[8.0, 9.0]]]
    for dtype in NUMERIC:
        def body(make, v0, v1, v2, dtype=dtype):
            return make(dtype, 3, tensor_array_name="foo").write(0, v0).write(1, v1).write(2, v2).stack()

        with x64_if(dtype):
            compare(body, *(convert(r, dtype) for r in rows), label=np.dtype(dtype).name)


@case(3)
def _case03():
    def body(make, e):
        return make(f32, 3, tensor_array_name="foo").write(0, e).write(1, e).write(2, e).stack()

    compare(body, np.zeros((0, 1), f32))


@case(4)
def _case04():
    blocks = [[[4.0, 5.0], [104.0, 105.0], [204.0, 205.0]], [[6.0, 7.0], [106.0, 107.0]], [[8.0, 9.0]]]
    for dtype in NUMERIC:
        def body(make, b0, b1, b2, dtype=dtype):
            ta = make(dtype, 3, tensor_array_name="foo", infer_shape=False)
            return ta.write(0, b0).write(1, b1).write(2, b2).concat()

        with x64_if(dtype):
            compare(body, *(convert(b, dtype) for b in blocks), label=np.dtype(dtype).name)


@case(5)
def _case05():
    """TF runs a while_loop whose body conds between two inner concats; the inner results are
    ragged ([1] vs [8, 9]), which no JAX loop carries, so jta runs the loop unrolled."""
    one, eight, nine, empty = i32([1]), i32([8]), i32([9]), np.zeros((0,), i32)

    def tf_body(make):
        def concat_1():
            return make(i32, 2, infer_shape=False).write(0, one).write(1, empty).concat()

        def concat_2():
            return make(i32, 3, infer_shape=False).write(0, eight).write(1, empty).write(2, nine).concat()

        def step(i, out):
            return i + 1, out.write(i, tf.cond(i < 3, concat_1, concat_2))

        _, out = tf.while_loop(lambda i, _: i < 6, step, (tf.constant(0), make(i32, 6, infer_shape=False)))
        return out.concat()

    def jta_body(make):
        out = make(i32, 6, infer_shape=False)
        for i in range(6):
            inner = (make(i32, 2, infer_shape=False).write(0, one).write(1, empty) if i < 3 else
                     make(i32, 3, infer_shape=False).write(0, eight).write(1, empty).write(2, nine))
            out = out.write(i, inner.concat())
        return out.concat()

    for mode in ("K", "L"):
        assert_agree(TF_RUNNERS[mode](tf_body), run_jta(jta_body), mode)
    assert_agree(run_k(tf_body), run_jta(jta_body, make=RawTA), "raw")


@case(6)
def _case06():
    def body(make, v):
        def fresh():
            return make(f32, 3, tensor_array_name="foo", element_shape=[1, 2])
        return fresh().read(0), fresh().write(1, v).stack(), fresh().write(1, v).concat()

    compare(body, f32([[4, 5]]))


@case(7)
def _case07():
    def body(make, v):
        def fresh():
            return make(f32, 3, tensor_array_name="foo")
        return fresh().write(1, v).read(0), fresh().write(1, v).stack(), fresh().write(1, v).concat()

    compare(body, f32([[4, 5]]))
    # ... also when the value is fed at run time in K (its static shape is unknown).
    assert_agree(run_k(body, Unknown(f32([[4, 5]]))), run_jta(body, f32([[4, 5]])), "fed value")


@case(8)
def _case08():
    matrix = [[1.0, 1.1], [2.0, 2.1], [3.0, 3.1]]
    for dtype in WITH_BF16:
        def body(make, vector, matrix, empty, dtype=dtype):
            out = []
            for value in (vector, matrix, empty):
                ta = make(dtype, 3, tensor_array_name="foo", infer_shape=False).unstack(value)
                out.append([ta.read(0), ta.read(1), ta.read(2)])
            return out

        with x64_if(dtype):
            compare(body, convert([1.0, 2.0, 3.0], dtype), convert(matrix, dtype), convert(np.zeros((3, 0)), dtype),
                    label=np.dtype(dtype).name)


@case(9)
def _case09():
    for dtype in WITH_BF16:
        def body(make, empty, vector, matrix, dtype=dtype):
            out = []
            for value, lengths in ((empty, [0, 0, 0]), (vector, [2, 0, 1]), (matrix, [2, 0, 1])):
                ta = make(dtype, 3, tensor_array_name="foo", infer_shape=False).split(value, lengths)
                out.append([ta.read(0), ta.read(1), ta.read(2)])
            return out

        with x64_if(dtype):
            compare(body, convert(np.zeros((0,)), dtype), convert([1.0, 2.0, 3.0], dtype),
                    convert([[1.0, 101.0], [2.0, 201.0], [3.0, 301.0]], dtype), label=np.dtype(dtype).name)


# -- 10-12: accumulators are arrays of their own, shared by source ------------------------------------

@case(10)
def _case10():
    for dtype in NUMERIC:
        def program(b, dtype=dtype):
            h = b.new(3, dtype, infer_shape=False)
            g = b.grad(h, "grad")
            for i, x in enumerate(([[4.0, 5.0]], [[1.0]], -3.0)):
                b.write(h, i, convert(x, dtype))
            for i, x in enumerate(([[5.0, 6.0]], [[2.0]], -2.0)):
                b.write(g, i, convert(x, dtype))
            return [b.read(h, i) for i in range(3)], [b.read(g, i) for i in range(3)]

        with x64_if(dtype):
            compare_program(program)


@case(11)
def _case11():
    def program(b):
        h = b.new(0, infer_shape=False, dynamic_size=True)
        for i, x in enumerate(([[4.0, 5.0]], [[1.0]], -3.0)):
            b.write(h, i, f32(x))
        g = b.grad(h, "grad")
        for i, x in enumerate(([[5.0, 6.0]], [[2.0]], -2.0)):
            b.write(g, i, f32(x))
        return b.size(h), b.size(g), [b.read(h, i) for i in range(3)], [b.read(g, i) for i in range(3)]

    compare_program(program)


@case(12)
def _case12():
    def program(b):
        h = b.new(3, infer_shape=False)
        g1, g2 = b.grad(h, "grad"), b.grad(h, "grad")
        b.write(g1, 0, f32([[4, 5]]))
        return g1 == g2, b.read(g2, 0)

    compare_program(program)


# -- 13-25: errors --------------------------------------------------------------------------------------

def error_case(body, *args, e=None, l=None):  # noqa: E741
    """K (graph and raw kernels) against jta; the E/L cells of §5.3 against TF alone."""
    compare(body, *args, modes=("K", "raw"))
    for mode, cell in (("E", e), ("L", l)):
        if cell is not None:
            tf_says(mode, body, *args, error=cell)


@case(13)
def _case13():
    error_case(lambda make: ta_(make).write(0, "wrong_type_scalar"),
               e=("InvalidArgumentError", "TensorArray dtype is float32 but Op is trying to write dtype string "),
               l=("InvalidArgumentError", "Invalid data types; op elements string but list elements float"))
    error_case(lambda make, v: ta_(make).write(0, v), Tensor(i32(3)),  # §5.3: an int32 tensor into float32
               e=("InvalidArgumentError", "TensorArray dtype is float32 but Op is trying to write dtype int32 "),
               l=("InvalidArgumentError", "Invalid data types; op elements int32 but list elements float"))
    # Python values are converted with preferred_dtype=dtype (§5.2): TF's graph-mode rules.
    for dtype in (np.float32, np.int32, np.complex64, np.bool_, np.uint8, jnp.bfloat16):
        for value in (3, 1.5, True, 1 + 2j, 300):
            compare(lambda make, dtype=dtype, value=value: make(dtype, 1).write(0, value).read(0), modes=("K",),
                    label=f"{np.dtype(dtype).name} <- {value!r}")


@case(14)
def _case14():
    error_case(lambda make: ta_(make).write(-1, 3.0),
               e=("OutOfRangeError", "Writing to negative indices (index -1) is not allowed."),
               l=("InvalidArgumentError", "Trying to modify element -1 in a list with 3 elements."))
    error_case(lambda make: ta_(make, 0, dynamic_size=True).write(-1, 3.0))


@case(15)
def _case15():
    error_case(lambda make: ta_(make).write(3, 3.0),
               e=("OutOfRangeError", "Tried to write to index 3 but array is not resizeable and size is: 3 "),
               l=("InvalidArgumentError", "Trying to modify element 3 in a list with 3 elements."))


@case(16)
def _case16():
    for dtype in (np.float64, np.int32):
        def program(b, dtype=dtype):
            h = b.new(3)
            b.write(h, 0, f32(1))
            if b.kind == "tf":
                return b.read_as(h, 0, dtype)
            return ops.TensorArrayReadV3(b.state, h, 0, b.flows[h], dtype)[1]

        with x64_if(dtype):
            compare_program(program, backends=("raw",))


@case(17)
def _case17():
    error_case(lambda make: ta_(make).write(0, 3.0).read(-1),
               e=("OutOfRangeError", "Reading from negative indices (index -1) is not allowed."),
               l=("InvalidArgumentError", "Trying to access element -1 in a list with 3 elements."))


@case(18)
def _case18():
    error_case(lambda make: ta_(make).write(0, 3.0).read(3),
               e=("OutOfRangeError", "Tried to read from index 3 but array size is: 3 "),
               l=("InvalidArgumentError", "Trying to access element 3 in a list with 3 elements."))


@case(19)
def _case19():
    def body(make):
        return ta_(make).write(2, 3.0).write(2, 3.0).read(2)

    error_case(body)
    error_case(lambda make: ta_(make, infer_shape=True).write(2, 3.0).write(2, 3.0).read(2))
    # E and L: the last write wins. jta.TensorArray keeps K's write-once check (its errors are K's).
    for mode in ("E", "L"):
        tf_says(mode, body, values=[f32(3)])


@case(20)
def _case20():
    error_case(lambda make: ta_(make).write(0, 3.0).write(1, 4.0).write(2, [3.0]).concat(),
               e=("InvalidArgumentError", "Concat saw a scalar shape at index 0 but requires at least vectors."),
               l=("InvalidArgumentError", "Concat saw a scalar shape at index 0 but requires at least vectors."))


@case(21)
def _case21():
    error_case(lambda make: ta_(make).write(0, [3.0]).write(1, [4.0]).write(2, [[3.0]]).concat(),
               l=("InvalidArgumentError", "PartialTensorShape: Incompatible ranks during merge: 0 vs. 1"))


@case(22)
def _case22():
    # A constant scalar `lengths` already fails TF's graph-time shape function; fed at run time
    # (as TF's test does) the kernel reports it. The raw kernels see it eagerly.
    def body(make, lengths):
        return ta_(make).split(f32([1, 2, 3]), lengths)

    lengths = np.int64(1)
    assert_agree(run_k(body, Unknown(lengths)), run_jta(body, lengths), "K")
    assert_agree(run_tf_raw(body, lengths), run_jta(body, lengths, make=RawTA), "raw")
    tf_says("E", body, lengths, error=("InvalidArgumentError", "Expected lengths to be a vector, received shape: [] "))


@case(23)
def _case23():
    error_case(lambda make: ta_(make).split(f32([1, 2, 3]), [1]),
               e=("InvalidArgumentError", "Expected sum of lengths to be equal to values.shape[0], but sum of "
                  "lengths is 1 and value's shape is: [3] "),
               l=("InvalidArgumentError", "Unused values in tensor. Length of tensor: 3 Values used: 1"))


@case(24)
def _case24():
    error_case(lambda make: ta_(make, 1).split(1.0, [1]),
               e=("InvalidArgumentError", "Expected value to be at least a vector, but received shape: [] "))
    got = run_l(lambda make: ta_(make, 1).split(1.0, [1]))
    assert got.error[0] == "ValueError" and "Shape must be at least rank 1 but is rank 0" in got.error[1]


@case(25)
def _case25():
    body = lambda make: ta_(make, 2).split([1.0], [1])  # noqa: E731
    error_case(body, e=("InvalidArgumentError", "TensorArray's size is not equal to the size of lengths (2 vs. 1), "
                        "and the TensorArray is not marked as dynamically resizeable."))
    assert run_l(body).error is None  # L: no error


# -- 26-28: aggregation, TensorArrayGradWithShape ------------------------------------------------------

@case(26)
def _case26():
    for dtype in NUMERIC:
        def sums(b, dtype=dtype):
            h = b.new(3, dtype, infer_shape=False)
            g = b.grad(h, "grad")
            for x in (3, 4, 5):
                b.write(g, 2, convert(x, dtype))
            return b.read(g, 2)

        with x64_if(dtype):
            compare_program(sums)

    def forward_twice(b):
        h = b.new(3, infer_shape=False)
        b.grad(h, "grad")
        b.write(h, 2, f32(3))
        b.write(h, 2, f32(4))

    def shape_mismatch(b):
        g = b.grad(b.new(3, infer_shape=False), "grad")
        b.write(g, 1, f32(1))
        b.write(g, 1, f32([1]))

    for program in (forward_twice, shape_mismatch):
        assert compare_program(program).error is not None


def _with_shape_static(element_shape, value):
    """The static shape of a read from a TensorArrayGradWithShape([4, 5]) array in a K graph."""
    from tensorflow.python.ops import gen_data_flow_ops

    with k_graph():
        ta = tf.TensorArray(tf.float32, size=3, element_shape=element_shape)
        handle, flow = gen_data_flow_ops.tensor_array_grad_with_shape(
            handle=ta.handle, flow_in=ta.flow, shape_to_prepend=tf.constant([4, 5]), source="source")
        g = tf.TensorArray(tf.float32, handle=handle, flow=flow)
        return shape_str(g.write(0, tf.compat.v1.placeholder_with_default(value, shape=None)).read(0).shape)


@case(27)
def _case27():
    def program(b, value):
        h = b.new(3, element_shape=[2, 3])
        g = b.grad(h, "source", shape_to_prepend=[4, 5])
        b.write(g, 0, value)
        return b.read(g, 0)

    wrong, right = np.ones((2, 3), f32), np.arange(120, dtype=f32).reshape(4, 5, 2, 3)
    assert compare_program(program, wrong).error is not None
    compare_program(program, right)
    assert _with_shape_static([2, 3], right) == "[?,?,2,3]"  # TF's static shape, compatible with jta's:
    b = Raw()
    assert b.array(b.grad(b.new(3, element_shape=[2, 3]), "s", shape_to_prepend=[4, 5])).element_shape == (4, 5, 2, 3)


@case(28)
def _case28():
    def program(b, value):
        g = b.grad(b.new(3), "source", shape_to_prepend=[4, 5])
        b.write(g, 0, value)
        return b.read(g, 0)

    value = np.arange(140, dtype=f32).reshape(4, 5, 7)
    compare_program(program, value)
    assert _with_shape_static(None, value) == "<unknown>"


# -- 29-36 ------------------------------------------------------------------------------------------

@case(29)
def _case29():
    def body(make, a, b):
        foo = make(f32, 1, tensor_array_name="foo").write(0, a)
        bar = make(f32, 1, tensor_array_name="bar").write(0, b)
        return foo.read(0) + bar.read(0)

    compare(body, f32(4), f32(5))


# Gradient cases: the TF forward (tf.TensorArray) of each program of test_gradients_cases.CASES.
def _fwd30(make, v0, v1):
    ta = make(v0.dtype, 3, infer_shape=False).write(0, v0).write(1, v1)
    return ta.read(0), ta.read(1), ta.read(0)


def _fwd31(make, v0, v1):
    ta = make(f32, 2, clear_after_read=False).write(0, v0).write(1, v1)
    return ta.stack(), ta.read(0), ta.concat()


def _fwd33(make, x):
    ta = make(f32, 2, clear_after_read=False).unstack(x)
    return ta.read(0), ta.read(0), ta.read(1)


def _fwd34(make, x):
    return (make(f32, 2, infer_shape=False).split(x, [2, 1]).concat(),)


def _fwd35(make, x):
    ta = make(f32, 0, dynamic_size=True).unstack(x)
    return ta.read(0), ta.read(1)


def _fwd47(make, x):
    return (make(f32, 2).unstack(x).read(0),)


def _fwd48(make, x0, x1):
    return (make(f32, 2).write(0, x0).write(1, x1).read(0),)


def _fwd49(make, x):
    return (make(f32, 3, dynamic_size=True).unstack(x).write(3, 4.0).stack(),)


def _fwd50(make, x):
    return (make(f32, 3, dynamic_size=True).split(x, [1, 1, 1]).write(3, [4.0]).concat(),)


def _fwd_scatter(read_8):
    def fwd(make, x):
        ta = make(f32, 0, dynamic_size=True).scatter([1, 8], x)
        return (ta.read(1), ta.read(8)) if read_8 else (ta.read(1),)
    return fwd


def _fwd57(make, x):
    return (make(f32, 0, dynamic_size=True).unstack(x).gather([1, 8]),)


def _fwd60(make, x):
    return (make(f32, 1, element_shape=[1]).write(0, x[0]).stack(),)


def _fwd37(dynamic):
    def fwd(make, v0, var, s0):
        ta = make(f32, 0 if dynamic else 3, dynamic_size=dynamic)

        def body(t, st, ta):
            return t + 1, st + v0[t], ta.write(t, v0[t] + var + st)

        _, _, ta = tf.while_loop(lambda t, *_: t < 3, body, [tf.constant(0), s0, ta])
        return (ta.stack(),)
    return fwd


def _fwd38(make, x):
    """GradSerialTwoLoops, as TF's test writes it."""
    acc = make(f32, 100, clear_after_read=False, element_shape=[])

    def first(i, acc):
        x1 = tf.cond(tf.equal(i, 0), lambda: x, lambda: acc.read(i - 1) * 2.0)
        return i + 1, acc.write(i, x1)

    i1, acc1 = tf.while_loop(lambda i, acc: i < 5, first, [tf.constant(0), acc])
    _, acc2 = tf.while_loop(lambda i, acc: i < 100, lambda i, acc: (i + 1, acc.write(i, 0.0)), [i1, acc1])
    return (acc2.stack(),)


def tf_gradients(mode, fwd, inputs, cts):
    """TF's outputs and input gradients: ``tf.gradients`` in a K graph (every output fetched in
    its own run: reads clear), ``tf.GradientTape`` eagerly (E) or in ``tf.function`` (L)."""
    if mode == "K":
        with k_graph() as graph:
            xs = [tf.constant(x) for x in inputs]
            outs = list(fwd(tf_make, *xs))
            grads = tf.gradients(outs, xs, grad_ys=[tf.constant(c) for c in cts])
            assert any(op.type == "TensorArrayGradV3" for op in graph.get_operations())
            with tf.compat.v1.Session(graph=graph) as sess:
                return [sess.run(o) for o in outs], sess.run(grads)

    def taped(*xs):
        with tf.GradientTape() as tape:
            tape.watch(xs)
            outs = list(fwd(tf_make, *xs))
        return outs, tape.gradient(outs, list(xs), output_gradients=[tf.constant(c) for c in cts])

    fn = taped if mode == "E" else tf.function(taped, autograph=False)
    outs, grads = fn(*(tf.constant(x) for x in inputs))
    return [o.numpy() for o in outs], [g.numpy() for g in grads]


def jta_gradients(key, inputs=None, cts=None):
    """jta's outputs and gradients by route: TF's backward graph through raw-op accumulators
    (``raw``) and through ``jta.gradients`` (``ta``), and ``jax.vjp`` of the jta.TensorArray
    forward. One ``jax.jit`` of all three (compiling once is faster than many eager ops)."""
    c = test_gradients_cases.CASES[key]

    @jax.jit
    def routes(inputs, cts):
        out = {}
        for api, backend in BACKENDS.items():
            b = backend()
            outs, backward = c.program(b, *inputs)
            grads = backward(cts)
            jta.throw(b.carry)
            out[api] = outs, grads
        out["jax.vjp"] = test_gradients_cases._vjp(c.program, len(inputs))(*inputs, *cts)
        return out

    return routes(tuple(inputs or c.inputs), tuple(cts or c.cts))


def grad_case(key, fwd, modes=("K",), inputs=None, cts=None):
    c = test_gradients_cases.CASES[key]
    inputs, cts = inputs or c.inputs, cts or c.cts
    mine = jta_gradients(key, inputs, cts)
    for mode in modes:
        outs, grads = tf_gradients(mode, fwd, inputs, cts)
        for route, (my_outs, my_grads) in mine.items():
            assert_close(tuple(my_grads), tuple(grads), 1e-6, 1e-6, f"{mode} grads vs {route}")
            assert_close(tuple(my_outs), tuple(outs), 1e-6, 1e-6, f"{mode} outputs vs {route}")


@case(30)
def _case30():
    grad_case("30", _fwd30)
    c = test_gradients_cases.CASES["30"]
    grad_case("30", _fwd30, inputs=[convert(x, np.complex64) for x in c.inputs],
              cts=[convert(x, np.complex64) for x in c.cts])


@case(31)
def _case31():
    grad_case("31", _fwd31)


@case(32)
def _case32():
    def body(make, v, clear):
        ta = make(f32, 2, tensor_array_name="foo", clear_after_read=clear).unstack(v)
        return ta.read(0), ta.read(0)

    value = f32([[1, -1], [10, -10]])
    for clear in (True, False):  # program order orders the two reads (TF's test: a control dependency)
        assert_agree(run_tf_raw(body, value, clear), run_jta(body, value, clear, make=RawTA), f"clear={clear}")
    # README: jta.TensorArray.read returns only the value, so it cannot clear a slot; it reads
    # twice as K does with clear_after_read=False.
    assert_agree(run_tf_raw(body, value, False), run_jta(body, value, True), "jta.TensorArray")


@case(33)
def _case33():
    grad_case("33", _fwd33)


@case(34)
def _case34():
    grad_case("34", _fwd34)


@case(35)
def _case35():
    grad_case("35", _fwd35)


@case(36)
def _case36():
    def body(make, v0, v1):
        closed_fresh = make(f32, 3, tensor_array_name="foo").close()
        size = make(f32, 3, tensor_array_name="foo").size()
        closed = make(f32, 3, tensor_array_name="foo", infer_shape=False).write(0, v0).write(1, v1).close()
        return closed_fresh, size, closed

    compare(body, f32([[4, 5]]), f32([3]))


# -- 37-41: loops, sources ---------------------------------------------------------------------------

@case(37)
def _case37():
    grad_case("37", _fwd37(False), modes=("K", "E", "L"))
    grad_case("37-dynamic", _fwd37(True), modes=("K",))


@case(38)
def _case38():
    grad_case("38", _fwd38, modes=("K", "E", "L"))


@case(39)
def _case39():
    """TF's while loop leaves the element shape known. A JAX loop carries a fixed pytree
    structure, so jta must know the element shape when a loop starts: unrolled, it is inferred."""
    def tf_body(make):
        _, ta = tf.while_loop(lambda i, _: i < 10, lambda i, ta: (i + 1, ta.write(i, [[0.0]])),
                              [tf.constant(0), make(f32, 10)], parallel_iterations=1)
        return shape_str(ta.element_shape)

    def jta_body(make):
        ta = make(f32, 10)
        for i in range(10):
            ta = ta.write(i, [[0.0]])
        return shape_str(ta.element_shape)

    for mode in ("K", "L"):
        assert_agree(TF_RUNNERS[mode](tf_body), run_jta(jta_body), mode)


@case(40)
def _case40():
    a, bb, g0 = *test_gradients_cases.CASES["40"].inputs, test_gradients_cases.CASES["40"].cts[0]
    with k_graph() as graph:
        ta = tf.TensorArray(tf.float32, size=2).write(0, a := tf.constant(a)).write(1, bb := tf.constant(bb))
        c = ta.read(0) + ta.read(1)
        grads = tf.gradients([c], [a], grad_ys=[g0])[0], tf.gradients([c], [bb], grad_ys=[g0])[0]
        sources = sorted(op.get_attr("source").decode() for op in graph.get_operations()
                         if op.type == "TensorArrayGradV3")
        with tf.compat.v1.Session(graph=graph) as sess:
            separate = [sess.run(g) for g in grads]
            together = sess.run(grads)
    assert set(sources) == {"gradients", "gradients_1"}
    for route, (_, got) in jta_gradients("40").items():
        assert_close(tuple(got), tuple(separate), 1e-6, 1e-6, route)
        assert_close(tuple(got), tuple(together), 1e-6, 1e-6, route)


@case(41)
def _case41():
    names = ["", "foo", "foo/bar", "gradients", "gradients_0", "gradients/foo", "gradients/foo/bar",
             "gradients_0/foo", "gradients_0/foo/bar", "foo/gradients", "foo/gradients/bar",
             "foo/bar/gradients_0/baz", "foo/gradients/bar/gradients_0/baz", "Const:0", "gradients:0"]
    for name in names:
        try:
            want = tensor_array_grad._GetGradSource(types.SimpleNamespace(name=name))
        except ValueError as e:
            with pytest.raises(ValueError) as got:
                gradients.grad_source(name)
            assert str(got.value) == str(e), name
        else:
            assert gradients.grad_source(name) == want, name


# -- 42-46: static shape inference ----------------------------------------------------------------

@case(42)
def _case42():
    def body(make, c0):
        return make(f32, 3, tensor_array_name="foo").write(0, c0).read(0)

    def mismatch(make, c0, c2):
        return make(f32, 3, tensor_array_name="foo").write(0, c0).write(1, c2)

    compare(body, f32([4, 5]), modes=("K", "raw"))
    compare(mismatch, f32([4, 5]), f32([4, 5, 6]), modes=("K", "raw"))  # ValueError / the kernel's text


@case(43)
def _case43():
    es = [None, None, None, 3]

    def body(make, c0, c4, c5):
        ta = make(f32, 6, tensor_array_name="foo", element_shape=es)
        declared = shape_str(ta.element_shape)
        ta = ta.write(0, c0)
        scattered = make(f32, 6, tensor_array_name="foo", element_shape=[None, 4, 2, 3]).scatter([4, 5], c4)
        split = make(f32, 2, tensor_array_name="foo", element_shape=es).split(c5, [5, 5])
        return (declared, shape_str(ta.element_shape), ta.read(0), shape_str(scattered.element_shape),
                scattered.read(4), shape_str(split.element_shape), split.read(1))

    compare(body, np.ones((1, 1, 2, 3), f32), np.ones((2, 5, 4, 2, 3), f32), np.ones((10, 4, 2, 3), f32),
            modes=("K",))
    compare(lambda make, c: make(f32, 6, tensor_array_name="foo", element_shape=es).write(0, c),
            np.ones((1, 1, 1, 4), f32), modes=("K", "raw"))


@case(44)
def _case44():
    def body(make, value, c1):
        ta = make(f32, 0, tensor_array_name="foo", dynamic_size=True).unstack(value)
        r0 = ta.read(0)
        ta = ta.write(3, c1)
        return r0, ta.read(1), ta.size(), ta.read(3)

    def bad_write(make, value, c1, c2):
        return make(f32, 0, tensor_array_name="foo", dynamic_size=True).unstack(value).write(3, c1).write(4, c2)

    def read_again(make, value, c1):  # K only: the first read of index 0 cleared it
        ta = make(f32, 0, tensor_array_name="foo", dynamic_size=True).unstack(value)
        ta.read(0)
        return ta.write(3, c1).read(0)

    value = f32([[1, -1], [10, -10], [100, -100]])
    compare(body, value, f32([4, 5]))
    compare(bad_write, value, f32([4, 5]), f32([4, 5, 6]), modes=("K", "L", "raw"))
    assert run_e(bad_write, value, f32([4, 5]), f32([4, 5, 6])).error[0] == "ValueError"  # E: its own text
    assert_agree(run_tf_raw(read_again, value, f32([4, 5])), run_jta(read_again, value, f32([4, 5]), make=RawTA))


@case(45)
def _case45():
    value = f32([[1, -1], [2, -2], [3, -3]])

    def equal(make, v):
        ta = make(f32, 0, tensor_array_name="foo", dynamic_size=True).split(v, [1, 1, 1])
        return ta.read(0), ta.size()

    def ragged(make, v, infer_shape):
        ta = make(f32, 0, tensor_array_name="foo", dynamic_size=True, infer_shape=infer_shape).split(v, [1, 2])
        return ta.read(0), ta.read(1)

    compare(equal, value)
    compare(ragged, value, False)
    # infer_shape=True: the K kernel pins the first piece's shape (identical_element_shapes), so
    # the second piece fails at run time; jta follows K. E has no kernel: (1, 2) and (2, 2).
    compare(ragged, value, True, modes=("K", "raw"))
    tf_says("E", ragged, value, True, values=[value[:1], value[1:]])


@case(46)
def _case46():
    def body(make, v):
        return make(f32, 3, tensor_array_name="foo").write(0, v).read(0)

    value = np.ones((2, 3), f32)
    k = run_k(body, Unknown(value))
    assert k.results[0][1] is None  # TF: the read's static shape is unknown
    assert_agree(k, run_jta(body, value))  # jta values always have a shape


# -- 47-50: gradients of unstack/write/split with unread slots --------------------------------------

@case(47)
def _case47():
    grad_case("47", _fwd47, modes=("K", "E", "L"))


@case(48)
def _case48():
    grad_case("48", _fwd48)


@case(49)
def _case49():
    grad_case("49", _fwd49, modes=("K", "E", "L"))


@case(50)
def _case50():
    grad_case("50", _fwd50)


# -- 51-57: static shapes, empty arrays, scatter -------------------------------------------------------

@case(51)
def _case51():
    def body(make, x, indices):
        ta = make(f32, 3, clear_after_read=False).write(0, x)
        return ta.stack(), ta.read(0), ta.gather(indices)

    got = compare(body, f32([1, 2, 3]), i32([0]), modes=("L",))["L"]
    assert [s for _, s in got.results] == [(3, 3), (3,), (1, 3)]


@case(52)
def _case52():
    error_case(lambda make: ta_(make, 0).stack(),
               l=("InvalidArgumentError", "Tried to stack elements of an empty list with non-fully-defined "
                  "element_shape: <unknown>"))


@case(53)
def _case53():
    # K keeps the Python-inferred element shape in a list shared by all derived objects, so the
    # unstack result may be discarded; jta's arrays are values (and L's), so jta uses the result.
    def discard(make, zeros):
        ta = make(f32, 0, tensor_array_name="foo")
        ta.unstack(zeros)
        return ta.stack(), ta.concat()

    def use(make, zeros):
        ta = make(f32, 0, tensor_array_name="foo").unstack(zeros)
        return ta.stack(), ta.concat()

    zeros = np.zeros((0, 3, 5), f32)
    assert_agree(run_k(discard, zeros), run_jta(use, zeros), "K")
    assert_agree(run_l(use, zeros), run_jta(use, zeros), "L")


@case(54)
def _case54():
    grad_case("54", _fwd_scatter(True))


@case(55)
def _case55():
    grad_case("55", _fwd_scatter(False))


@case(56)
def _case56():
    def body(make, ones2, ones1, five_six):
        def after(n):
            ta = make(f32, 5, tensor_array_name="foo")
            for indices, value in [([3, 4], ones2), ([1], ones1), ([0, 2], five_six)][:n]:
                ta = ta.scatter(indices, value)
            return ta.stack()
        return after(1), after(2), after(3)

    compare(body, np.ones(2, f32), np.ones(1, f32), f32([5, 6]))


@case(57)
def _case57():
    grad_case("57", _fwd57)


@case(58, spec_only="device placement of the creation op needs a 3-worker TF cluster; jta has no devices "
                     "per array (JAX places values)")
def _case58():
    # What applies: colocate_with_first_write_call is accepted and ignored.
    ta = jta.TensorArray(f32, 2, colocate_with_first_write_call=False).write(0, f32(1)).write(1, f32(2))
    np.testing.assert_array_equal(ta.stack(), [1.0, 2.0])


@case(59)
def _case59():
    # TF's test also orders variable updates with control dependencies around identity();
    # JAX has no control dependencies, so only the arrays are compared.
    def body(make):
        ta0 = make(f32, 2, infer_shape=False).write(0, 0.0).identity()
        ta1 = make(i32, 4, infer_shape=True).write(0, 1).identity()
        return (np.dtype(getattr(ta0.dtype, "as_numpy_dtype", ta0.dtype)).name,
                np.dtype(getattr(ta1.dtype, "as_numpy_dtype", ta1.dtype)).name,
                ta0.read(0), ta1.read(0), ta0.size(), ta1.size())

    got = compare(body, modes=("K", "E", "L"))
    assert got["K"].results[2][1] is None and got["L"].results[2][1] is None  # infer_shape=False
    assert got["E"].results[2][1] == ()


@case(60)
def _case60():
    grad_case("60", _fwd60)


# -- 61-67: declared element shapes ---------------------------------------------------------------------

@case(61)
def _case61():
    def body(make, a, b):
        ta = make(f32, 3, tensor_array_name="foo", infer_shape=False, element_shape=[None, 10, 20])
        return ta.write(0, a).write(1, a).write(2, b).concat()

    compare(body, np.ones((50, 10, 20), f32), np.ones((1, 10, 20), f32))


@case(62)
def _case62():
    def body(make, v):
        return make(f32, 2, tensor_array_name="foo", infer_shape=False, element_shape=[None, 10, 20]).write(0, v)

    value = np.ones((1, 20, 20), f32)
    compare(body, value, modes=("K", "L", "raw"))
    assert run_e(body, value).error[0] == "ValueError"


@case(63)
def _case63():
    def body(make, a):
        ta = make(f32, 3, tensor_array_name="foo", element_shape=[None, 10, 20])
        before = shape_str(ta.element_shape)
        ta = ta.write(0, a)
        return before, shape_str(ta.element_shape), ta.read(0)

    def mismatch(make, a, b):
        return make(f32, 3, tensor_array_name="foo", element_shape=[None, 10, 20]).write(0, a).write(1, b)

    a, b = np.ones((50, 10, 20), f32), np.ones((1, 10, 20), f32)
    compare(body, a, modes=("K", "E", "L"))
    compare(mismatch, a, b, modes=("K", "L", "raw"))
    assert run_e(mismatch, a, b).error[0] == "ValueError"


@case(64)
def _case64():
    compare(lambda make: make(f32, 0, dynamic_size=True, element_shape=(5, 10)).stack())


@case(65)
def _case65():
    # K's static shape is [None, 5, None]; running it fails in the kernel (the attribute is not
    # fully defined), which is what jta raises.
    def body(make):
        return make(f32, 0, dynamic_size=True, element_shape=(5, None)).stack()

    compare(body, modes=("K", "raw"))
    with k_graph():
        assert shape_str(body(tf_make).shape) == "[?,5,?]"


@case(66)
def _case66():
    compare(lambda make, v: make(f32, 42).write(0, v).stack(), f32([0]))


@case(67)
def _case67():
    # TF's legacy string handles ["a", "b"]; jta's handles are names, so it is asked for a name
    # that its state does not hold. Both are NotFound; the texts name different things.
    @tf.function
    def legacy():
        return tf.raw_ops.TensorArrayConcatV2(handle=["a", "b"], flow_in=0.1, dtype=tf.int32,
                                              element_shape_except0=tf.TensorShape([1]))

    with pytest.raises(tf.errors.NotFoundError, match=r"does not exist"):
        legacy()
    state, _, _ = ops.TensorArrayV3(ops.new_state(), 3, i32, tensor_array_name="a")
    with pytest.raises(jta.errors.NotFoundError, match=r"Container .* does not exist"):
        ops.TensorArrayConcatV3(state, "b", 0.1, i32)


# -- 68-75: accumulators ---------------------------------------------------------------------------

@case(68)
def _case68():
    def program(b):
        h = b.new(3, element_shape=[1, 2])
        ga, gb = b.grad(h, "a"), b.grad(h, "b")
        b.write(ga, 0, f32([[4, 5]]))
        return b.read(gb, 0), b.read(ga, 0)

    compare_program(program)


@case(69)
def _case69():
    def program(b, i):
        h = b.new(3, infer_shape=False)
        b.write(h, 0, f32([[1, 2, 3]]))
        return b.read(b.grad(h, "grad"), i)

    compare_program(program, 0)
    assert compare_program(program, 1).error is not None


@case(70)
def _case70():
    def program(b, i):
        g = b.grad(b.new(3, element_shape=[2]), "grad")
        return b.read(g, i), b.size(g)

    compare_program(program, 7)
    assert compare_program(program, -1).error is not None


@case(71)
def _case71():
    def frozen(b):
        h = b.new(0, dynamic_size=True)
        b.write(h, 0, f32(1))
        b.grad(h, "grad")
        b.write(h, 1, f32(2))

    def empty(b):
        h = b.new(0, dynamic_size=True)
        b.write(b.grad(h, "grad"), 0, f32(1))

    def scatter(b):  # §3.1: scatters into the frozen array fail too
        h = b.new(0, dynamic_size=True)
        b.grad(h, "grad")
        b.scatter(h, i32([0]), f32([1]))

    for program in (frozen, empty, scatter):
        assert compare_program(program).error is not None


@case(72)
def _case72():
    def closed(b):
        h = b.new(3)
        b.close(h)
        b.grad(h, "grad")

    def grad_of_grad(b):
        b.grad(b.grad(b.new(3), "grad"), "grad")

    for program in (closed, grad_of_grad):
        assert compare_program(program).error is not None


@case(73)
def _case73():
    def read_twice(b):
        g = b.grad(b.new(3, element_shape=[]), "grad")
        b.write(g, 2, f32(1))
        b.read(g, 2)
        return b.read(g, 2)

    def write_after_read(b):
        g = b.grad(b.new(3, element_shape=[]), "grad")
        b.read(g, 2)
        b.write(g, 2, f32(1))

    for program in (read_twice, write_after_read):
        assert compare_program(program).error is not None


@case(74)
def _case74():
    def program(b, *values):
        h = b.new(3, infer_shape=False)
        b.write(h, 0, f32([1]))
        g = b.grad(h, "grad")
        for v in values:
            b.write(g, 0, v)
        return b.read(g, 0)

    assert compare_program(program, f32([1, 2])).error is not None
    compare_program(program, f32([5]), f32([6]))


@case(75)
def _case75():
    def registered_first(b):
        h = b.new(3, element_shape=[2])
        b.grad(h, "s")
        return b.read(b.grad(h, "s", shape_to_prepend=[4]), 0)

    def unknown_shape(b):
        h = b.new(3, infer_shape=False)
        b.write(h, 0, f32([1, 2, 3, 4, 5, 6, 7]))
        return b.read(b.grad(h, "s", shape_to_prepend=[4]), 0)

    def known_shape(b):
        return b.read(b.grad(b.new(3, element_shape=[2, 3]), "s", shape_to_prepend=[4, 5]), 0)

    for program in (registered_first, unknown_shape, known_shape):
        compare_program(program)


# -- 76-80 ---------------------------------------------------------------------------------------

@case(76)
def _case76():
    x = np.arange(1.0, 7.0, dtype=f32).reshape(3, 2)
    with k_graph() as graph:
        xt = tf.constant(x)
        ta = tf.TensorArray(tf.float32, size=3).unstack(xt)
        y = tf.reshape(tf.stack([ta.read(i) * (i + 1) for i in range(3)]), [-1]) ** 2
        jac = pfor_gradients.jacobian(y, xt, use_pfor=True)
        with_shape = [op for op in graph.get_operations() if op.type == "TensorArrayGradWithShape"]
        with tf.compat.v1.Session(graph=graph) as sess:
            jac, prepends = sess.run((jac, [op.inputs[2] for op in with_shape]))
    assert prepends and all(list(p) == [6] for p in prepends)

    def f(v):
        ta = jta.TensorArray(jnp.float32, 3).unstack(v)
        return jnp.stack([ta.read(i) * (i + 1) for i in range(3)]).reshape(-1) ** 2

    assert_close(jax.jacrev(f)(x), jac, 1e-6, 1e-6)
    # TF's route: one TensorArrayGradWithShape([6]) accumulator written with [6, 2] values.
    for api in BACKENDS:
        b = BACKENDS[api]()
        h = b.new(3)
        b.unstack(h, x)
        s = jnp.stack([b.read(h, i) * (i + 1) for i in range(3)])
        ds = (2 * s.reshape(-1) * np.eye(6, dtype=f32)).reshape(6, 3, 2)
        for i in range(3):
            b.read_grad(h, i, ds[:, i] * (i + 1), "loop_body/gradients", shape_to_prepend=[6])
        dx = b.scatter_grad(h, np.arange(3), "loop_body/gradients", shape_to_prepend=[6])
        assert_close(jnp.moveaxis(dx, 1, 0), jac, 1e-6, 1e-6, api)


@case(77)
def _case77():
    v = f32([1, 2])
    bodies = {
        "read": lambda make: ta_(make).write(0, v).close().read(0),
        "write": lambda make: ta_(make).write(0, v).close().write(1, v),
        "stack": lambda make: ta_(make, infer_shape=True).write(0, v).close().stack(),
        "size": lambda make: ta_(make).write(0, v).close().size(),
        "close twice": lambda make: ta_(make).write(0, v).close().close(),
    }
    for what, body in bodies.items():
        want = run_tf_raw(body)
        assert_agree(want, run_jta(body, make=RawTA), f"raw {what}")
        assert_agree(want, run_jta(body), f"jta.TensorArray {what}")


@case(78)
def _case78():
    rows = f32([[1, 2], [3, 4], [5, 6]])

    def duplicate(make, rows):
        return ta_(make, infer_shape=True).scatter([1, 0, 0], rows)

    def duplicate_then_read(make, rows):  # TF keeps the scatter's effects up to the failing index
        ta = ta_(make, infer_shape=True)
        try:
            ta.scatter([1, 0, 0], rows)
        except (tf.errors.InvalidArgumentError, jta.errors.InvalidArgumentError):
            pass
        return ta.read(1), ta.read(0)

    compare(duplicate, rows, modes=("K", "raw"))
    np.testing.assert_array_equal(run_tf_raw(duplicate_then_read, rows).values(), [rows[0], rows[1]])
    # README "Differences": an op that fails raises instead of returning a partially updated state,
    # so jta's array is the one before the scatter: nothing written, no element shape to zero-fill.
    assert "Could not read from TensorArray index 1." in run_jta(duplicate_then_read, rows, make=RawTA).error[1]
    compare(lambda make, r: ta_(make).scatter([5], r[:1]), rows, modes=("K", "raw"))
    compare(lambda make, r: ta_(make).unstack(np.concatenate([r, r[:1]])), rows, modes=("K", "raw"))
    compare(lambda make, r: ta_(make).scatter([0, 1], r), rows, modes=("raw",))  # TF's graph checks it statically


@case(79)
def _case79():
    def body(make, v, write):
        ta = make(f32, 3, tensor_array_name="foo", element_shape=[2])
        zeros = ta.read(1)
        return (zeros, ta.write(1, v)) if write else zeros

    value = f32([1, 2])
    for write in (False, True):
        assert_agree(run_tf_raw(body, value, write), run_jta(body, value, write, make=RawTA), f"write={write}")


@case(80, spec_only="mode X (the tf2xla lowering, jit_compile=True) is not what jta implements; only its "
                     "source-keyed accumulators apply")
def _case80():
    state, h, flow = ops.TensorArrayV3(ops.new_state(), 3, f32, element_shape=[2])
    for dv in (f32([1, 2]), f32([10, 20])):
        state, s, flow_s = ops.TensorArrayGradV3(state, h, flow, "s")
        state, flow_s = ops.TensorArrayWriteV3(state, s, 1, dv, flow_s)
    state, t, flow_t = ops.TensorArrayGradV3(state, h, flow, "t")
    state, ws = ops.TensorArrayGatherV3(state, s, i32([0, 1, 2]), flow_s, f32)
    state, wt = ops.TensorArrayGatherV3(state, t, i32([0, 1, 2]), flow_t, f32)
    np.testing.assert_array_equal(ws, [[0, 0], [11, 22], [0, 0]])
    np.testing.assert_array_equal(wt, np.zeros((3, 2)))


# -- the three TF hazards: never run on TF (it aborts the process or returns garbage) --------------------

@case("H1", spec_only="TF aborts (std::bad_alloc): concat of an accumulator whose forward was never split")
def _hazard_h1():
    for backend in (Raw, Rules):
        b = backend()
        h = b.new(3, element_shape=[2])
        with pytest.raises(jta.errors.InvalidArgumentError, match="never split"):
            b.split_grad(h)


@case("H2", spec_only="TF aborts (CHECK failure): split with a negative length")
def _hazard_h2():
    for make in (jta.TensorArray, RawTA):
        with pytest.raises(jta.errors.InvalidArgumentError, match="must be non-negative"):
            make(f32, 2, tensor_array_name="foo").split(f32([1, 2, 3]), [4, -1])


@case("H3", spec_only="TF's L returns garbage: scatter past the end of a dynamic TensorList-backed array")
def _hazard_h3():
    # jta follows K here (the array grows to max index + 1; §2.5), with the rows where K puts them.
    ta = jta.TensorArray(f32, 0, dynamic_size=True).scatter([2, 3], f32([[1, 2], [3, 4]]))
    np.testing.assert_array_equal(ta.stack(), [[0, 0], [0, 0], [1, 2], [3, 4]])


@pytest.mark.parametrize("key", list(CASES))
def test_case(key):
    """One §8 case (``-spec``: against the spec's expectation only, for the reason in SPEC_ONLY)."""
    CASES[key]()


@pytest.mark.filterwarnings("ignore::numpy.exceptions.ComplexWarning")  # TF casts complex -> real too
def test_numpy_values_are_cast_like_tf():
    """TF's Python layer converts NumPy values with ``preferred_dtype`` (a JAX array is a typed tensor)."""
    for value in (np.int32(3), np.float64(1.5), np.complex128(1 + 2j)):
        compare(lambda make, v: make(f32, 1).write(0, v).read(0), value, modes=("K", "E", "L"), label=repr(value))


def test_every_spec_case_is_here():
    numbers = {k.split("-")[0] for k in CASES}
    assert numbers == {str(n) for n in range(1, 81)} | {"H1", "H2", "H3"}


def test_k_graph_restores_control_flow_v2():
    before = tf.compat.v1.control_flow_v2_enabled()
    with k_graph():
        assert type(tf.TensorArray(tf.float32, 2)._implementation).__name__ == "_GraphTensorArray"
    assert tf.compat.v1.control_flow_v2_enabled() == before
