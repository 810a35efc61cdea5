"""``jax.grad`` of an imported forward, and the imported train step, are TensorFlow's tape gradient for
every elementwise op of the table, at the points where conventions differ: kinks (0, 6), ties of
``maximum``/``minimum``, ``-0.0``, a zero upstream gradient at a pole (``sqrt`` of 0: TensorFlow's
kernels give 0, not ``0 * inf``), arguments outside the domain.

All ops run in one program (a variable per op), so a mismatch names its op. The op lists are checked
against the op table: an elementwise op added to it must be listed here (or named as not elementwise).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

tf = pytest.importorskip("tensorflow")

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
from tensorflow.python.framework import op_def_registry  # noqa: E402

import jta  # noqa: E402
from jta.graph_import import supported_ops  # noqa: E402

UNARY = ("Abs Acos Acosh Asin Asinh Atan Atanh BesselI0 BesselI0e BesselI1 BesselI1e Ceil Cos Cosh Digamma Elu Erf Erfc Erfinv Exp Expm1 Floor Inv L2Loss LeakyRelu "
         "Lgamma Log Log1p LogSoftmax Ndtri Neg Reciprocal Relu Relu6 Round Rsqrt Selu Sigmoid Sign Sin Sinh Softmax "
         "Softplus Softsign Sqrt Square Tan Tanh").split()
BINARY = ("Add AddV2 Atan2 Div DivNoNan FloorDiv FloorMod Igamma Igammac Maximum Minimum Mul MulNoNan Pow RealDiv SquaredDifference "
          "Sub Xdivy Xlog1py Xlogy").split()
# Ops of the table with one or two inputs of the float type ``T`` that are not elementwise in ``x`` (or take
# no gradient, or are control flow), and why an elementwise one is left out.
NOT_HERE = {
    **dict.fromkeys("AvgPool AvgPool3D CheckNumerics Cholesky DepthToSpace DiagPart EnsureShape Enter Exit Identity LRN "
                    "MatrixDeterminant MatrixDiag MatrixDiagPart MatrixInverse MaxPool MaxPool3D NextIteration "
                    "OnesLike PreventGradient RefEnter RefExit RefNextIteration Snapshot SpaceToDepth Squeeze "
                    "StopGradient Unpack ZerosLike BatchMatMul BatchMatMulV2 BiasAdd BiasAddV1 Conv2D Conv3D "
                    "DepthwiseConv2dNative ExtractImagePatches MatMul MatrixSetDiag MatrixSolve MatrixTriangularSolve".split(),
                    "not elementwise, or not differentiated"),
    "Polygamma": "its first operand is the order",
    "Zeta": "its domain (x > 1, q > 0) has none of the points; tests/test_tf2_ops_search.py checks it",
    "IgammaGradA": "TensorFlow has no gradient of it (tests/test_tf2_ops_extra.py checks its values)",
    **dict.fromkeys("Cross Diag Dilation2D HSVToRGB MatrixSquareRoot RGBToHSV".split(),
                    "not elementwise (tests/test_tf2_ops_extra.py checks values and gradients)"),
    "TridiagonalSolve": "not elementwise (tests/test_tf2_ops_ctc.py checks values and gradients)",
}

X = np.array([0.0, -0.0, 1.0, -1.0, 6.0, 0.5, 2.0, -2.5, 3.0], np.float32)
Y = np.array([0.0, 0.0, 1.0, -2.0, 6.0, 0.5, 1.0, -2.5, 2.0], np.float32)  # ties with X at 0, 1, 6, 0.5, -2.5
UPSTREAM = np.array([1.0, 0.0, 2.0, 3.0, 0.0, 1.5, 0.0, 2.0, 1.0], np.float32)  # zeros at the poles too


def _elementwise(name: str) -> bool:
    """An op whose inputs (one or two) and output are all of type ``T``, which may be a float."""
    op = op_def_registry.get(name)
    if op is None or len(op.output_arg) != 1 or op.output_arg[0].type_attr != "T":
        return False
    inputs = list(op.input_arg)
    if not 1 <= len(inputs) <= 2 or any(a.type_attr != "T" or a.number_attr or a.type_list_attr for a in inputs):
        return False
    t = next(a for a in op.attr if a.name == "T")
    return not t.HasField("allowed_values") or "DT_FLOAT" in str(t.allowed_values)


def test_every_elementwise_op_of_the_table_is_listed() -> None:
    found = {n for n in supported_ops() if not n.endswith("Grad") and _elementwise(n)}
    assert found == set(UNARY) | set(BINARY) | set(NOT_HERE), (found - set(UNARY) - set(BINARY) - set(NOT_HERE))


def _call(name: str, *args: Any) -> Any:
    names = [a.name for a in op_def_registry.get(name).input_arg]
    return getattr(tf.raw_ops, name)(**dict(zip(names, args, strict=True)))


def test_gradients_are_tensorflows_at_kinks_ties_and_poles() -> None:
    """In each operand: a binary op's second operand is differentiated too, at the points, the first one
    fixed at ``Y`` (``pow``'s exponent at a negative base: TensorFlow masks ``log(x)`` there)."""
    ops = UNARY + BINARY + [f"{n}:y" for n in BINARY]
    # the points are the variables (the derivative at them is the gradient's factor), the argument is ones
    weights = {name: tf.Variable(X, name=name.replace(":", "_")) for name in ops}
    ones = np.ones(9, np.float32)
    spec = [tf.TensorSpec([9], tf.float32)]

    def term(n: str, x: Any) -> Any:
        at = x * weights[n]
        if n.endswith(":y"):
            return _call(n[:-2], Y, at)
        return _call(n, at, *([Y] if n in BINARY else []))

    def loss(x: Any) -> Any:
        return tf.add_n([tf.reduce_sum(UPSTREAM * term(n, x)) for n in ops])

    forward = tf.function(loss, input_signature=spec)

    @tf.function(input_signature=spec)
    def train(x: Any) -> Any:
        with tf.GradientTape() as tape:
            value = loss(x)
        return tape.gradient(value, [weights[n] for n in ops], unconnected_gradients=tf.UnconnectedGradients.ZERO)

    want = [g.numpy() for g in train(ones)]
    jax_fn, params = jta.import_function(forward, ones)
    grads = jax.jit(jax.grad(jax_fn))(params, ones)
    step, step_params = jta.import_function(train, ones)
    steps = jax.jit(step)(step_params, ones)
    wrong = []
    for name, w, s in zip(ops, want, steps, strict=True):
        for how, got in (("jax.grad", grads[name.replace(":", "_")]), ("train step", s)):
            if not np.allclose(got, w, rtol=1e-5, atol=1e-6, equal_nan=True):
                at = ~np.isclose(got, w, rtol=1e-5, atol=1e-6, equal_nan=True)
                wrong.append(f"{name} ({how}) at x = {X[at].tolist()}: TF {w[at].tolist()}, jta {np.asarray(got)[at].tolist()}")
    assert not wrong, "\n".join(wrong)


def test_divisions_round_one_at_a_time_as_tensorflows_kernels() -> None:
    """Red-team batch 19: TensorFlow's gradient of ``x / y`` with respect to ``y`` is ``(-x / y) / y``, two
    rounded divisions; JAX's ``-x * y**-2`` overflows once ``y**2`` does (a solver's last step, BiCGSTAB's
    tiny residuals: NaN gradients), and under ``jit`` XLA fuses ``(a / b) / c`` into ``a / (b * c)``, which
    overflows the same way (an imported train step, a forward dividing twice); a softmax written by hand over
    logits near 80 got a wrong finite gradient. Each division now rounds as TensorFlow's kernel does."""
    @tf.function
    def f(x: Any, y: Any, a: Any, b: Any) -> Any:
        return tf.stack([x / y, x / y / y, x / (y / y), tf.exp(a) / (tf.exp(a) + tf.exp(b))])

    @tf.function
    def train(x: Any, y: Any, a: Any, b: Any) -> Any:
        with tf.GradientTape() as tape:
            tape.watch([x, y, a, b])
            out = tf.reduce_sum(f(x, y, a, b)[::3])
        return out, tape.gradient(out, [x, y, a, b])

    args = (np.float32(3e-21), np.float32(1e-20), np.float32(80.0), np.float32(80.0))
    fn, params = jta.import_function(f, *args)
    for run in (fn, jax.jit(fn)):
        np.testing.assert_allclose(run(params, *args), f(*args).numpy(), rtol=1e-6)
    step, step_params = jta.import_function(train, *args)
    want = [w.numpy() for w in train(*args)[1]]
    grad = jax.grad(lambda *a: jnp.sum(fn(params, *a)[::3]), argnums=(0, 1, 2, 3))
    for got in (grad(*args), jax.jit(grad)(*args), step(step_params, *args)[1], jax.jit(step)(step_params, *args)[1]):
        np.testing.assert_allclose(got, want, rtol=1e-6)


def test_fused_batch_norm_differentiates_as_tensorflows_gradient() -> None:
    """TensorFlow's gradient of ``FusedBatchNorm*`` goes through ``y`` to ``x``, scale and offset only: the
    moving mean and variance an inference-mode layer reads get none (``jax.grad`` gave them the
    derivative), nor does what reads the statistics it returns."""
    x = np.array([[0.5, -1.0, 2.0], [1.5, 0.3, -0.7]], np.float32)
    stats = {k: tf.Variable(np.array(v, np.float32), name=k) for k, v in
             {"mean": [0.1, -0.2, 0.3], "var": [0.5, 1.5, 2.0], "scale": [1.0, 2.0, 0.5], "off": [0.0, 0.1, 0.2]}.items()}

    def bn(v: Any) -> Any:
        y = tf.compat.v1.nn.fused_batch_norm(v[None, None], stats["scale"], stats["off"], mean=stats["mean"],
                                             variance=stats["var"], is_training=False)[0][0, 0]
        return tf.reduce_sum(tf.square(y))

    f = tf.function(bn, input_signature=[tf.TensorSpec([2, 3], tf.float32)])
    with tf.GradientTape() as tape:
        loss = bn(tf.constant(x))
    want = tape.gradient(loss, list(stats.values()), unconnected_gradients="zero")
    fn, params = jta.import_function(f, x)
    got = jax.jit(jax.grad(fn))(params, x)
    for name, w in zip(stats, want, strict=True):
        np.testing.assert_allclose(got[name], w.numpy(), rtol=1e-5, atol=1e-6, err_msg=name)


@pytest.mark.parametrize("exclusive, reverse", [(False, False), (True, True),
                                                pytest.param(True, False, marks=pytest.mark.long_only)])
def test_cumprod_differentiates_as_tensorflows_gradient(exclusive: bool, reverse: bool) -> None:
    """TensorFlow's gradient of ``cumprod`` divides by ``x`` with ``div_no_nan``: 0 at a zero entry, where
    the derivative is not (``jax.grad`` of ``jnp.cumprod`` gave it; stick-breaking with a 1 hit it)."""
    x = np.array([1.0, 0.0, 2.0, 0.0, 3.0], np.float32)
    up = np.arange(1.0, 6.0, dtype=np.float32)
    f = tf.function(lambda v: tf.math.cumprod(v, exclusive=exclusive, reverse=reverse),
                    input_signature=[tf.TensorSpec([5], tf.float32)])
    v = tf.constant(x)
    with tf.GradientTape() as tape:
        tape.watch(v)
        loss = tf.reduce_sum(f(v) * up)
    fn, params = jta.import_function(f, x)
    got = jax.jit(jax.grad(lambda u: (fn(params, u) * up).sum()))(x)
    np.testing.assert_allclose(got, tape.gradient(loss, v).numpy(), rtol=1e-6)
