"""A real workload side by side: an Elman RNN through TensorArrays in TensorFlow and in jta.

The same network (``h_t = tanh(x_t W_xh + h_{t-1} W_hh + b)``, ``y_t = h_t W_hy + b_y``; batch 4,
input and output 3, hidden 8, T = 12, seeded NumPy parameters) is built

* in TF2 with ``tf.while_loop`` writing each step's output into a ``tf.TensorArray``, gradients by
  ``tf.GradientTape``, eagerly (mode E) and inside ``tf.function`` (mode L);
* in a TF1 graph with control flow v1 and ``tf.gradients`` (mode K: ``TensorArrayGradV3``);
* in JAX with ``lax.scan`` carrying a ``jta.TensorArray``, gradients by ``jax.grad``, and by TF's
  own backward recipe through ``jta.gradients`` (accumulator registry, cell VJPs by ``jax.vjp``).

Three variants: outputs written to a TensorArray (``plain``); inputs also unstacked into a
TensorArray and read back per step (``input_ta``); a decoder whose step t reads what step t-1
wrote (``decoder``). The stacked outputs, the loss and the gradients of all parameters (and of
the inputs) agree to 1e-5 relative in float32 and to 1e-12 in float64; ``-s`` prints the largest
relative differences.
"""

from __future__ import annotations

import contextlib

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax

import jta
from jta import gradients
from tests.helpers import k_graph

tf = pytest.importorskip("tensorflow")

T, B, D, H = 12, 4, 3, 8  # steps, batch, input = output size, hidden
NAMES = ("W_xh", "W_hh", "b", "W_hy", "b_y")
VARIANTS = ("plain", "input_ta", "decoder")
DTYPES = (np.float32, np.float64)
# (rtol, atol as a fraction of the largest |entry| of the tensor compared)
TOL = {np.float32: (1e-5, 1e-6), np.float64: (1e-12, 1e-13)}

_rng = np.random.default_rng(1234)
# Weights small enough that the decoder's feedback loop does not amplify float32 rounding noise.
_PARAMS = {"W_xh": _rng.normal(0, 0.4, (D, H)), "W_hh": _rng.normal(0, 0.3, (H, H)), "b": _rng.normal(0, 0.1, H),
           "W_hy": _rng.normal(0, 0.2, (H, D)), "b_y": _rng.normal(0, 0.1, D)}
_XS = _rng.normal(0, 1, (T, B, D))
_TARGET = _rng.normal(0, 1, (T + 1, B, D))


def data(dtype):
    """Parameters (a tuple in ``NAMES`` order), inputs and targets in ``dtype``."""
    return tuple(_PARAMS[k].astype(dtype) for k in NAMES), _XS.astype(dtype), _TARGET.astype(dtype)


def steps(variant):
    """The loop range: the decoder writes ``xs[0]`` at 0 and steps 1..T read index t-1."""
    return (1, T + 1) if variant == "decoder" else (0, T)


def x64(dtype):
    return jax.enable_x64(True) if dtype == np.float64 else contextlib.nullcontext()


# -- TensorFlow ----------------------------------------------------------------------------------

def tf_rnn(params, xs, target, variant):
    """The RNN in TF: ``tf.while_loop`` + ``tf.TensorArray``; returns (stacked outputs, loss)."""
    W_xh, W_hh, b, W_hy, b_y = params
    dtype = xs.dtype
    start, stop = steps(variant)
    out = tf.TensorArray(dtype, size=stop, element_shape=(B, D), clear_after_read=variant != "decoder")
    inp = tf.TensorArray(dtype, size=T, element_shape=(B, D)).unstack(xs) if variant == "input_ta" else None
    if variant == "decoder":
        out = out.write(0, xs[0])

    def body(t, h, out):
        x = out.read(t - 1) if variant == "decoder" else inp.read(t) if inp is not None else xs[t]
        h = tf.tanh(tf.matmul(x, W_xh) + tf.matmul(h, W_hh) + b)
        return t + 1, h, out.write(t, tf.matmul(h, W_hy) + b_y)

    _, h, out = tf.while_loop(lambda t, *_: t < stop, body, (tf.constant(start), tf.zeros((B, H), dtype), out))
    ys = out.stack()
    return ys, tf.reduce_sum((ys - target[:stop]) ** 2) / B + tf.reduce_sum(h**2)


def tf_tape(params, xs, target, variant):
    with tf.GradientTape() as tape:
        tape.watch([params, xs])
        ys, loss = tf_rnn(params, xs, target, variant)
    return ys, loss, tape.gradient(loss, [*params, xs])


def run_tf(mode, variant, dtype):
    """(ys, loss, grads of the parameters and of xs) computed by TF in ``mode``."""
    params, xs, target = data(dtype)
    if mode == "k_graph":
        with k_graph() as graph:
            params, xs, target = [tf.constant(p) for p in params], tf.constant(xs), tf.constant(target)
            ys, loss = tf_rnn(params, xs, target, variant)
            grads = tf.gradients(loss, [*params, xs])
            ops = {op.type for op in graph.get_operations()}
            assert {"TensorArrayV3", "TensorArrayGradV3", "Enter", "Exit"} <= ops  # K: kernels, loop v1
            assert not any(op.startswith("TensorList") for op in ops)
            with tf.compat.v1.Session(graph=graph) as sess:
                return sess.run((ys, loss, grads))
    params, xs, target = [tf.constant(p) for p in params], tf.constant(xs), tf.constant(target)
    fn = tf_tape if mode == "eager" else tf.function(tf_tape, autograph=False)
    ys, loss, grads = fn(params, xs, target, variant)
    return ys.numpy(), loss.numpy(), [g.numpy() for g in grads]


# -- jta -----------------------------------------------------------------------------------------

def cell(params, x, h):
    W_xh, W_hh, b, W_hy, b_y = params
    h = jnp.tanh(x @ W_xh + h @ W_hh + b)
    return h, h @ W_hy + b_y


def jta_forward(params, xs, variant):
    """The twin: ``lax.scan`` carrying ``jta.TensorArray``s. Returns (out, inp, h_T, per-step (x, h_prev))."""
    start, stop = steps(variant)
    out = jta.TensorArray(xs.dtype, size=stop, element_shape=(B, D), tensor_array_name="out")
    inp = None
    if variant == "input_ta":
        inp = jta.TensorArray(xs.dtype, size=T, element_shape=(B, D), tensor_array_name="inp").unstack(xs)
    if variant == "decoder":
        out = out.write(0, xs[0])

    def step(carry, t):
        h, out = carry
        x = out.read(t - 1) if variant == "decoder" else inp.read(t) if inp is not None else xs[t]
        h_new, y = cell(params, x, h)
        return (h_new, out.write(t, y)), (x, h)

    (h, out), saved = lax.scan(step, (jnp.zeros((B, H), xs.dtype), out), jnp.arange(start, stop))
    return out, inp, h, saved


def jta_loss(params, xs, target, variant):
    out, _, h, _ = jta_forward(params, xs, variant)
    ys = out.stack()
    return jnp.sum((ys - target[:ys.shape[0]]) ** 2) / B + jnp.sum(h**2), ys


@jax.jit(static_argnames="variant")
def _value_and_grad(params, xs, target, variant):
    (loss, ys), grads = jax.value_and_grad(jta_loss, argnums=(0, 1), has_aux=True)(params, xs, target, variant)
    return ys, loss, [*grads[0], grads[1]]


def jta_grad(variant, dtype):
    params, xs, target = data(dtype)
    with x64(dtype):
        out = _value_and_grad(params, xs, target, variant=variant)
        return jax.tree_util.tree_map(np.asarray, out)


@jax.jit(static_argnames="variant")
def _tf_style_backward(params, xs, target, variant):
    """TF's backward recipe on jta's registry API: the Stack gradient scatters dys into the
    accumulator of ``out``; a reverse ``lax.scan`` (carrying the registry) takes each step's output
    gradient with Write's gradient, backpropagates the cell with ``jax.vjp``, and adds the input
    gradient into the accumulator of what the step read (Read's gradient); Unstack's gradient
    gathers the input TensorArray's totals, the decoder's Write at 0 gives d xs[0]."""
    start, stop = steps(variant)
    out, inp, h_T, (x_seq, h_seq) = jta_forward(params, xs, variant)
    ys = out.stack()
    loss = jnp.sum((ys - target[:stop]) ** 2) / B + jnp.sum(h_T**2)
    src = "gradients"
    reg = gradients.stack_grad({}, out, 2 * (ys - target[:stop]) / B, src)
    if inp is not None:
        reg, _ = gradients.accumulator(reg, inp, src)  # the loop carry needs a fixed registry structure

    def back(carry, k):
        reg, dh, dparams = carry
        t, x, h_prev = k + start, x_seq[k], h_seq[k]
        reg, dy = gradients.write_grad(reg, out, t, src)
        _, vjp = jax.vjp(cell, params, x, h_prev)
        dp, dx, dh = vjp((dh, dy))
        if variant == "decoder":
            reg = gradients.read_grad(reg, out, t - 1, dx, src)
        elif inp is not None:
            reg = gradients.read_grad(reg, inp, t, dx, src)
        return (reg, dh, jax.tree_util.tree_map(jnp.add, dparams, dp)), dx

    zeros = jax.tree_util.tree_map(jnp.zeros_like, params)
    (reg, _, dparams), dx_seq = lax.scan(back, (reg, 2 * h_T, zeros), jnp.arange(stop - start), reverse=True)
    if variant == "plain":
        dxs = dx_seq
    elif variant == "input_ta":
        reg, dxs = gradients.unstack_grad(reg, inp, src)
    else:
        reg, dx0 = gradients.write_grad(reg, out, 0, src)
        dxs = jnp.zeros_like(xs).at[0].set(dx0)
    return (ys, loss, [*dparams, dxs]), reg


def jta_tf_style_backward(variant, dtype):
    with x64(dtype):
        out, reg = _tf_style_backward(*data(dtype), variant=variant)
        jta.throw(reg)  # no accumulator recorded an error (e.g. a slot read twice)
        return jax.tree_util.tree_map(np.asarray, out)


# -- comparisons ---------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def jax_results():
    return {(v, d): jta_grad(v, d) for v in VARIANTS for d in DTYPES}


def compare(got, want, dtype, label):
    """assert_allclose on (ys, loss, grads); prints the largest relative differences, elementwise
    ``|a - b| / |b|`` (with ``|b|`` at least 1% of the tensor's largest entry)."""
    rtol, atol = TOL[dtype]
    names = ["ys", "loss", *(f"d{n}" for n in NAMES), "dxs"]
    worst = {}
    for name, a, b in zip(names, [got[0], got[1], *got[2]], [want[0], want[1], *want[2]], strict=True):
        a, b = np.asarray(a), np.asarray(b)
        assert a.dtype == dtype and a.shape == b.shape, (name, a.dtype, a.shape, b.shape)
        scale = float(np.max(np.abs(b)))
        np.testing.assert_allclose(a, b, rtol=rtol, atol=atol * scale, err_msg=f"{label}: {name}")
        worst[name] = float(np.max(np.abs(a - b) / np.maximum(np.abs(b), 0.01 * scale)))
    grads = max(v for k, v in worst.items() if k.startswith("d"))
    print(f"\n{label}: max rel diff outputs {max(worst['ys'], worst['loss']):.2e}, gradients {grads:.2e} "
          f"(worst {max(worst, key=worst.get)})")


@pytest.mark.parametrize("dtype", DTYPES, ids=["float32", "float64"])
@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.parametrize("mode", ["eager", "tf.function", "k_graph"])
def test_tf_and_jta_agree(jax_results, mode, variant, dtype):
    compare(jax_results[variant, dtype], run_tf(mode, variant, dtype), dtype,
            f"{variant}/{np.dtype(dtype).name}: jax.grad vs TF {mode}")


@pytest.mark.parametrize("dtype", DTYPES, ids=["float32", "float64"])
@pytest.mark.parametrize("variant", VARIANTS)
def test_tf_style_backward_through_jta_gradients(jax_results, variant, dtype):
    compare(jta_tf_style_backward(variant, dtype), jax_results[variant, dtype], dtype,
            f"{variant}/{np.dtype(dtype).name}: jta.gradients vs jax.grad")


def test_k_graph_gradients_use_tensor_array_grad_accumulators():
    with k_graph() as graph:
        params, xs, target = data(np.float32)
        params = [tf.constant(p) for p in params]
        tf.gradients(tf_rnn(params, tf.constant(xs), tf.constant(target), "input_ta")[1], params)
        sources = [op for op in graph.get_operations() if op.type == "TensorArrayGradV3"]
    assert {op.get_attr("source").decode() for op in sources} == {"gradients"}
    assert len(sources) >= 2  # one per forward array (inputs and outputs), inside and outside the loop
