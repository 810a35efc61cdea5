"""Writes the example notebooks (``python notebooks/_make_notebooks.py [--execute]``).

The notebooks are generated from the cell lists below so that they stay reviewable as code.
With ``--execute`` each notebook is run with nbclient and stored with its outputs (GitHub renders
them); without it they are stored without outputs.
"""

from __future__ import annotations

import sys
from pathlib import Path

import nbformat
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

HERE = Path(__file__).resolve().parent


def md(text: str):
    return new_markdown_cell(text.strip("\n"))


def code(text: str):
    return new_code_cell(text.strip("\n"))


SETUP = """
import logging

import jax
import jax.numpy as jnp
import matplotlib.pyplot as plt
import numpy as np

import jta

logging.getLogger("jax._src.debugging").setLevel(logging.CRITICAL)  # errors raised in callbacks are shown below
print(f"jax {jax.__version__}, jta {jta.__version__}, {jax.devices()[0].platform}")
"""

# ------------------------------------------------------------------------------------------
QUICKSTART = [
    md("""
# jta quickstart

`jta.TensorArray` is TensorFlow's `TensorArray` as an immutable JAX pytree: every mutator
(`write`, `scatter`, `unstack`, `split`, `close`) returns a **new** array, so it can be carried
through `jax.jit`, `lax.scan`, `lax.while_loop`, `vmap` and `grad`.

This notebook covers: the basics and the repr, a TensorArray in `lax.scan`,
`stack`/`gather`/`concat`/`split`, arrays that grow inside `jit`, and how errors are checked
inside compiled code (`jta.throw`).
"""),
    code(SETUP),
    md("""
## A TensorArray is a value

Writing returns a new array; the old one is unchanged. The repr shows the slots: `W` written,
`.` empty (the legend lists the other states). In Jupyter an array renders as a coloured strip.
"""),
    code("""
ta = jta.TensorArray(jnp.float32, size=4, element_shape=(2,), tensor_array_name="demo")
ta2 = ta.write(0, jnp.array([1.0, 2.0])).write(2, jnp.array([3.0, 4.0]))
print(ta)  # unchanged
ta2
"""),
    code("""
print("read(2) =", ta2.read(2), "  read(1) =", ta2.read(1), "(unwritten slots of known shape read as zeros)")
print("stack() =\\n", ta2.stack())
"""),
    md("""
## In `lax.scan`: a small RNN

The inputs are unstacked into one array and read back at the (traced) step index; the hidden
states are written into another. Both arrays are ordinary pytrees in the scan carry or closure.
"""),
    code("""
def rnn(W, U, xs):
    steps, hidden = xs.shape[0], W.shape[0]
    inputs = jta.TensorArray(jnp.float32, size=steps, tensor_array_name="inputs").unstack(xs)
    outputs = jta.TensorArray(jnp.float32, size=steps, element_shape=(hidden,), tensor_array_name="h")

    def step(carry, t):
        h, outputs = carry
        h = jnp.tanh(W @ h + U @ inputs.read(t))
        return (h, outputs.write(t, h)), None

    (_, outputs), _ = jax.lax.scan(step, (jnp.zeros(hidden), outputs), jnp.arange(steps))
    return outputs


def rnn_reference(W, U, xs):  # the same recurrence with scan's own stacked outputs
    def step(h, x):
        h = jnp.tanh(W @ h + U @ x)
        return h, h
    return jax.lax.scan(step, jnp.zeros(W.shape[0]), xs)[1]


k1, k2, k3 = jax.random.split(jax.random.PRNGKey(0), 3)
steps, hidden, features = 40, 5, 3
W = 1.2 * jax.random.normal(k1, (hidden, hidden)) / np.sqrt(hidden)
U = jax.random.normal(k2, (hidden, features))
xs = jnp.sin(jnp.linspace(0, 6, steps))[:, None] * jax.random.normal(k3, (features,))

out = jax.jit(rnn)(W, U, xs)
np.testing.assert_allclose(out.stack(), rnn_reference(W, U, xs), rtol=1e-5, atol=1e-6)
out
"""),
    code("""
fig, ax = plt.subplots(figsize=(7, 2.5))
ax.plot(out.stack())
ax.set(xlabel="step t", ylabel="h_t", title="hidden states written into the TensorArray")
plt.show()
"""),
    md("""
## `gather`, `scatter`, `concat`, `split`
"""),
    code("""
print("gather([0, 5, 10]) shape:", out.gather(jnp.array([0, 5, 10])).shape)
sc = jta.TensorArray(jnp.float32, size=4, element_shape=(2,)).scatter(jnp.array([3, 0]), jnp.ones((2, 2)))
sc
"""),
    md("""
Without a fully known element shape, elements may differ in their first dimension
(`infer_shape=False`): `split` with concrete lengths makes a *ragged* array, `concat` joins it
back. Inside `jit`, traced lengths must split into equal pieces.
"""),
    code("""
words = jta.TensorArray(jnp.int32, size=3, infer_shape=False).split(jnp.arange(6), [1, 3, 2])
print(words)
print("read(1) =", words.read(1), "  concat() =", words.concat())

equal = jax.jit(lambda v, n: jta.TensorArray(jnp.float32, size=3).split(v, n).concat())
print("inside jit:", equal(jnp.arange(6.0), jnp.array([2, 2, 2])))
"""),
    md("""
## Growing inside `jit`: `dynamic_size=True` with a `capacity`

Buffer shapes must be static in JAX, so an array that grows at traced indices gets a static
slot budget (`capacity=`); its logical size is a traced leaf. Here: the Collatz sequence of
`n`, whose length is only known at run time, collected in a `lax.while_loop`.
"""),
    code("""
@jax.jit
def collatz(n):
    seq = jta.TensorArray(jnp.int32, size=0, dynamic_size=True, capacity=200, element_shape=())

    def body(carry):
        n, i, seq = carry
        seq = seq.write(i, n)
        return jnp.where(n % 2 == 0, n // 2, 3 * n + 1), i + 1, seq

    _, _, seq = jax.lax.while_loop(lambda c: c[0] != 1, body, (n, 0, seq))
    return seq


seq = collatz(27)
print("size:", int(seq.size()), "| first values:", seq.stack()[:8])
fig, ax = plt.subplots(figsize=(7, 2.2))
ax.plot(seq.stack(), ".-")
ax.set(yscale="log", xlabel="i", title="Collatz(27), written into a growing TensorArray inside jit")
plt.show()
"""),
    md("""
## Errors, and how checks work inside `jit`

Problems that are known while tracing (shapes, dtypes, Python-int indices) raise immediately,
with TensorFlow's exception class and message:
"""),
    code("""
try:
    ta.write(7, jnp.zeros(2))
except jta.errors.InvalidArgumentError as e:
    print("InvalidArgumentError:", e)

try:
    ta.write(0, jnp.zeros(3))
except ValueError as e:
    print("ValueError:", e)
"""),
    md("""
An index computed inside `jit` is a tracer: nothing can raise while tracing. jta instead
**records** the problem in the array's pytree (an `int32[4]` error record plus a bitfield per
slot). The returned array shows the recorded error, and `jta.throw` raises it with
TensorFlow's class and text:
"""),
    code("""
@jax.jit
def put(ta, i, value):
    return ta.write(i, value)


bad = put(ta, 7, jnp.zeros(2))  # no exception: the error is recorded
bad
"""),
    code("""
try:
    jta.throw(bad)  # works on any pytree holding TensorArrays
except jta.errors.InvalidArgumentError as e:
    print("InvalidArgumentError:", e)
"""),
    md("""
Per-slot errors (writing a slot twice, writing after a read, reading a cleared slot) set sticky
bits of that slot, shown as `!` in the strip:
"""),
    code("""
def write_twice(ta, i):
    return ta.write(i, jnp.ones(2)).write(i, jnp.ones(2))

twice = jax.jit(write_twice)(ta, 1)
print(twice)
"""),
    md("""
Value-returning methods (`read`, `stack`, `gather`, `concat`) check the record when they run
inside compiled code: a host callback raises only if an error was recorded (one predicate on
the fast path). JAX reports it as a `JaxRuntimeError` whose message carries jta's class and text.
Printing an array while tracing is safe too: its leaves are shown as `traced`.
"""),
    code("""
@jax.jit
def stacked(i):
    t = jta.TensorArray(jnp.float32, size=3, element_shape=()).write(i, 1.0)
    print("while tracing:", t)
    return t.stack()


print(stacked(1))
try:
    stacked(5)
except Exception as e:  # jax.errors.JaxRuntimeError
    print(type(e).__name__, "->", next(line for line in str(e).splitlines() if "InvalidArgumentError" in line))
"""),
    md("""
`TensorArray(..., checks=False)` drops all of this bookkeeping for maximum speed: indices are
not range-checked and writing a slot twice is undefined.

## `vmap` and `grad`

A TensorArray program is an ordinary JAX function, so it batches and differentiates:
"""),
    code("""
batched = jax.vmap(lambda shift: rnn(W, U, xs + shift).stack())(jnp.linspace(-1, 1, 8))
print("vmap over 8 input shifts:", batched.shape)

def loss(W):
    return jnp.sum(rnn(W, U, xs).stack() ** 2)


def loss_reference(W):
    return jnp.sum(rnn_reference(W, U, xs) ** 2)


g = jax.jit(jax.grad(loss))(W)
np.testing.assert_allclose(g, jax.grad(loss_reference)(W), rtol=1e-4, atol=1e-5)
print("grad through the TensorArray matches the plain scan; |dL/dW| =", float(jnp.linalg.norm(g)))
"""),
]

# ------------------------------------------------------------------------------------------
GRADIENTS = [
    md("""
# TensorFlow's gradient machinery in jta

`jax.grad` differentiates TensorArray programs directly. `jta.gradients` additionally
reproduces how **TensorFlow** differentiates them, step by step: for a forward array and a
*gradient source* (one per `tf.gradients` call), `TensorArrayGradV3` creates an aggregating
**accumulator**; the backward rules write partial gradients into it (read → write,
gather → scatter, concat → split) and read totals out (write → read, scatter → gather,
split → concat). That is what you need to port a hand-written TF backward pass, or to use
`TensorArrayGradWithShape`.

jta keeps TF's hidden per-session state explicit: a **registry**, a plain dict
`{(forward name, source): accumulator}` threaded through your code (it is a pytree).
"""),
    code(SETUP.replace("import jta\n", "import jta\nfrom jta import gradients as G\n")),
    md("""
## A forward program and its TF-style backward pass

The forward pass unstacks `xs` into an array and reads each element: `y_t = tanh(w * x_t)`,
`loss = sum(y^2)`. TensorFlow's backward pass for `read` writes the cotangent into the
accumulator (`read_grad`); the backward pass for `unstack` gathers all totals (`unstack_grad`).
"""),
    code("""
T, D = 6, 3
kx, kw, kc = jax.random.split(jax.random.PRNGKey(1), 3)
xs = jax.random.normal(kx, (T, D))
w = jax.random.normal(kw, (D,))


def forward(xs, w):
    ta = jta.TensorArray(jnp.float32, size=T, element_shape=(D,), tensor_array_name="xs").unstack(xs)
    ys = jnp.stack([jnp.tanh(w * ta.read(t)) for t in range(T)])
    return ta, ys


def loss(xs, w, c=1.0):
    return jnp.sum(c * forward(xs, w)[1] ** 2)


def backward(xs, w, c=1.0, source="gradients", registry=None):
    ta, ys = forward(xs, w)
    dys = 2 * c * ys                                   # d loss / d ys
    registry = {} if registry is None else registry
    for t in reversed(range(T)):
        dread = dys[t] * w * (1 - ys[t] ** 2)          # through tanh(w * x_t)
        registry = G.read_grad(registry, ta, t, dread, source=source)
    registry, dxs = G.unstack_grad(registry, ta, source=source)
    return registry, dxs


registry, dxs = jax.jit(backward)(xs, w)
np.testing.assert_allclose(dxs, jax.grad(loss)(xs, w), rtol=1e-5, atol=1e-6)
print("TF-style backward pass == jax.grad")
jta.describe(registry)
"""),
    md("""
The accumulator of `('xs', 'gradients')` was written at every slot and then read (and cleared)
by `unstack_grad`, TensorFlow's `clear_after_read` semantics for gradient arrays (`c`).

## Sources: two gradient computations without double counting

Each `tf.gradients` call gets its own source (`gradients`, `gradients_1`, …; `G.grad_source`
extracts it from an op name). Two backward passes over the same forward array that share a
registry stay independent if their sources differ. With one shared source they add up in one
accumulator: the gradient of one loss would include the other's.
"""),
    code("""
print(G.grad_source("gradients_1/while/TensorArrayReadV3_grad/foo"))

reg = {}
reg, d_a = backward(xs, w, c=1.0, source="gradients", registry=reg)
reg, d_b = backward(xs, w, c=3.0, source="gradients_1", registry=reg)
np.testing.assert_allclose(d_a, jax.grad(loss)(xs, w, 1.0), rtol=1e-5, atol=1e-6)
np.testing.assert_allclose(d_b, jax.grad(loss)(xs, w, 3.0), rtol=1e-5, atol=1e-6)
print("two sources, one registry: each gradient is its own loss's gradient")
jta.describe(reg)
"""),
    code("""
def accumulate(registry, c, source):  # the read gradients only, no read-out yet
    ta, ys = forward(xs, w)
    for t in range(T):
        registry = G.read_grad(registry, ta, t, 2 * c * ys[t] * w * (1 - ys[t] ** 2), source=source)
    return registry, ta


shared, ta = accumulate({}, 1.0, "gradients")
shared, _ = accumulate(shared, 3.0, "gradients")       # the same source: both land in one accumulator
shared, mixed = G.unstack_grad(shared, ta, source="gradients")
np.testing.assert_allclose(mixed, d_a + d_b, rtol=1e-5, atol=1e-6)
print("one shared source mixes the two gradients: max |mixed - d_a| =", float(jnp.max(jnp.abs(mixed - d_a))))
"""),
    md("""
The same accumulators exist in `jta.raw_ops`, keyed inside the explicit `State` (TF's
`TensorArrayGradV3(handle, flow, source)`); the state's repr lists which accumulators exist
for which sources:
"""),
    code("""
from jta import raw_ops as ops

state = ops.new_state()
state, h, flow = ops.TensorArrayV3(state, T, jnp.float32, element_shape=(D,), tensor_array_name="xs")
state, flow = ops.TensorArrayScatterV3(state, h, jnp.arange(T), xs, flow)
state, g1, _ = ops.TensorArrayGradV3(state, h, flow, "gradients")
state, g2, _ = ops.TensorArrayGradV3(state, h, flow, "gradients_1")
state, _ = ops.TensorArrayWriteV3(state, g1, 2, jnp.ones(D), flow)
state, _ = ops.TensorArrayWriteV3(state, g1, 2, jnp.ones(D), flow)   # accumulators aggregate
state, v = ops.TensorArrayReadV3(state, g1, 2, flow, jnp.float32)
print("accumulated:", v, " handles:", g1, g2)
state
"""),
    md("""
A new accumulator starts with the forward array's `W` marks: like TensorFlow, it soft-copies
the forward element shapes, so a slot that nothing was written into reads as zeros. Slot 2 of
`gradients` was aggregated twice and then read, which cleared it (`c`).
"""),
    md("""
## `TensorArrayGradWithShape`: many gradients in one accumulator

`shape_to_prepend=(K,)` gives accumulator elements of shape `(K, *element_shape)`: K cotangents
travel through one backward pass (TF uses this for `pfor`/Jacobians). Below, K weighted losses
`L_k = sum(C[k] * y^2)` are differentiated at once, and compared with `vmap` over K single
backward passes and with `vmap(jax.grad)`.
"""),
    code("""
K = 4
C = jax.random.uniform(kc, (K, T, D))


def backward_with_shape(xs, w, C):
    ta, ys = forward(xs, w)
    registry = {}
    for t in reversed(range(T)):
        dread = 2 * C[:, t] * ys[t] * w * (1 - ys[t] ** 2)          # (K, D): K cotangents
        registry = G.read_grad(registry, ta, t, dread, source="gradients", shape_to_prepend=(K,))
    registry, d = G.unstack_grad(registry, ta, source="gradients", shape_to_prepend=(K,))
    return registry, jnp.moveaxis(d, 1, 0)                           # (T, K, D) -> (K, T, D)


registry, d_with_shape = jax.jit(backward_with_shape)(xs, w, C)
d_vmap = jax.vmap(lambda c: backward(xs, w, c)[1])(C)               # K backward passes, batched
d_jax = jax.vmap(jax.grad(loss), in_axes=(None, None, 0))(xs, w, C)
np.testing.assert_allclose(d_with_shape, d_jax, rtol=1e-5, atol=1e-6)
np.testing.assert_allclose(d_vmap, d_jax, rtol=1e-5, atol=1e-6)
print("GradWithShape == vmap(TF-style backward) == vmap(jax.grad); shape", d_with_shape.shape)
registry[("xs", "gradients")]
"""),
    md("""
## Per-step gradients of an RNN (`vmap` over many gradients)

How much does the final state of a tanh RNN depend on the input at step `t`? `jax.grad`
through the TensorArray program gives `dL/dx_t` for every step; `vmap` runs it for several
recurrent scales at once. Small scales forget (vanishing gradients), large ones remember.
"""),
    code("""
steps, hidden = 60, 8
W0 = jax.random.orthogonal(jax.random.PRNGKey(2), hidden)
inputs = 0.1 * jax.random.normal(jax.random.PRNGKey(3), (steps, hidden))


def final_state_loss(xs, scale):
    states = jta.TensorArray(jnp.float32, size=steps, element_shape=(hidden,), tensor_array_name="h")

    def step(carry, t):
        h, states = carry
        h = jnp.tanh(scale * W0 @ h + xs[t])
        return (h, states.write(t, h)), None

    (_, states), _ = jax.lax.scan(step, (jnp.zeros(hidden), states), jnp.arange(steps))
    return jnp.sum(states.read(steps - 1) ** 2)


def reference_loss(xs, scale):
    h = jnp.zeros(hidden)
    for t in range(steps):
        h = jnp.tanh(scale * W0 @ h + xs[t])
    return jnp.sum(h ** 2)


scales = jnp.array([0.5, 0.9, 1.1, 1.5])
per_step = jax.jit(jax.vmap(jax.grad(final_state_loss), in_axes=(None, 0)))(inputs, scales)  # (4, steps, hidden)
np.testing.assert_allclose(per_step[2], jax.grad(reference_loss)(inputs, 1.1), rtol=1e-4, atol=1e-7)

fig, ax = plt.subplots(figsize=(7, 3))
for s, g in zip(scales, per_step, strict=True):
    ax.semilogy(jnp.linalg.norm(g, axis=1) + 1e-30, label=f"scale {float(s):.1f}")
ax.set(xlabel="input step t", ylabel="|dL/dx_t|", title="per-step gradients of the final state")
ax.set_ylim(bottom=1e-12)
ax.legend()
plt.show()
"""),
]

# ------------------------------------------------------------------------------------------
PORTING = [
    md("""
# Porting from TensorFlow

A TensorFlow `TensorArray` loop and its jta twin, side by side, with results compared.
TensorFlow cells run only when TensorFlow is installed (`HAVE_TF`); without it they are skipped
and the jta cells still run.

| TensorFlow | jta |
|---|---|
| `ta = ta.write(i, v)` (returns a new object; in eager mode it mutates) | `ta = ta.write(i, v)` (always a new value) |
| `tf.while_loop` / `for t in tf.range(n)` in `tf.function` | `lax.scan`, `lax.fori_loop`, `lax.while_loop` in `jax.jit` |
| `tf.GradientTape` / `tf.gradients` | `jax.grad` (or `jta.gradients` for TF's own backward rules) |
| `tf.raw_ops.TensorArrayV3(...)` → handle, flow | `state, handle, flow = jta.raw_ops.TensorArrayV3(state, ...)` |
| `dynamic_size=True` | `dynamic_size=True, capacity=N` to grow at traced indices |
"""),
    code("""
import os
import re

os.environ["TF_CPP_MIN_LOG_LEVEL"] = "3"  # quiet TensorFlow's C++ logging
try:
    import tensorflow as tf
    HAVE_TF = True
except ImportError:
    tf = None
    HAVE_TF = False
""" + SETUP + """
print("TensorFlow:", tf.__version__ if HAVE_TF else "not installed: TensorFlow cells are skipped")
"""),
    md("""
## An RNN loop

The same recurrence `h_t = tanh(W h_{t-1} + U x_t)`, collecting the states in a TensorArray.
"""),
    code("""
steps, hidden, features = 20, 4, 3
rng = np.random.default_rng(0)
W_np = (rng.normal(size=(hidden, hidden)) / 2).astype(np.float32)
U_np = rng.normal(size=(hidden, features)).astype(np.float32)
xs_np = rng.normal(size=(steps, features)).astype(np.float32)
"""),
    code("""
# TensorFlow
if HAVE_TF:
    @tf.function
    def tf_rnn(W, U, xs):
        n = tf.shape(xs)[0]
        inputs = tf.TensorArray(tf.float32, size=n).unstack(xs)
        outputs = tf.TensorArray(tf.float32, size=n, element_shape=[hidden])
        h = tf.zeros([hidden])
        for t in tf.range(n):
            h = tf.tanh(tf.linalg.matvec(W, h) + tf.linalg.matvec(U, inputs.read(t)))
            outputs = outputs.write(t, h)
        return outputs.stack()

    tf_out = tf_rnn(tf.constant(W_np), tf.constant(U_np), tf.constant(xs_np)).numpy()
    print(tf_out[-1])
else:
    print("skipped: TensorFlow is not installed")
"""),
    code("""
# jta
@jax.jit
def jta_rnn(W, U, xs):
    n = xs.shape[0]                                        # static in JAX
    inputs = jta.TensorArray(jnp.float32, size=n).unstack(xs)
    outputs = jta.TensorArray(jnp.float32, size=n, element_shape=[hidden])

    def step(carry, t):                                    # the loop body, as a function
        h, outputs = carry
        h = jnp.tanh(W @ h + U @ inputs.read(t))
        return (h, outputs.write(t, h)), None

    (_, outputs), _ = jax.lax.scan(step, (jnp.zeros([hidden]), outputs), jnp.arange(n))
    return outputs.stack()


jta_out = np.asarray(jta_rnn(W_np, U_np, xs_np))
print(jta_out[-1])
if HAVE_TF:
    np.testing.assert_allclose(jta_out, tf_out, rtol=1e-5, atol=1e-6)
    print("max |jta - tf| =", np.abs(jta_out - tf_out).max())
"""),
    md("""
## Gradients: `tf.GradientTape` vs `jax.grad`
"""),
    code("""
def jta_loss(W, U, xs):
    return jnp.sum(jta_rnn(W, U, xs) ** 2)

jta_dW, jta_dxs = jax.grad(jta_loss, argnums=(0, 2))(W_np, U_np, xs_np)

if HAVE_TF:
    W_tf, xs_tf = tf.Variable(W_np), tf.Variable(xs_np)
    with tf.GradientTape() as tape:
        tf_loss = tf.reduce_sum(tf_rnn(W_tf, tf.constant(U_np), xs_tf) ** 2)
    tf_dW, tf_dxs = tape.gradient(tf_loss, [W_tf, xs_tf])
    np.testing.assert_allclose(jta_dW, tf_dW.numpy(), rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(jta_dxs, tf_dxs.numpy(), rtol=1e-4, atol=1e-5)
    print("gradients agree: max |dW| difference", np.abs(jta_dW - tf_dW.numpy()).max())
else:
    print("jta dL/dW norm:", float(jnp.linalg.norm(jta_dW)))
"""),
    code("""
fig, ax = plt.subplots(figsize=(7, 2.5))
ax.plot(np.linalg.norm(jta_dxs, axis=1), "o-", label="jta (jax.grad)")
if HAVE_TF:
    ax.plot(np.linalg.norm(tf_dxs.numpy(), axis=1), "x--", label="TensorFlow (GradientTape)")
ax.set(xlabel="step t", ylabel="|dL/dx_t|", title="per-step input gradients")
ax.legend()
plt.show()
"""),
    md("""
## A loop of unknown length: `dynamic_size`

TensorFlow grows a `dynamic_size` array freely. In JAX buffer shapes are static, so a jta array
that grows at traced indices needs a `capacity`; the logical size is carried as a traced value.
"""),
    code("""
def tf_powers_below(limit):  # 1, 2, 4, ... < limit
    ta = tf.TensorArray(tf.int32, size=0, dynamic_size=True)
    i, x = tf.constant(0), tf.constant(1)
    while x < limit:
        ta = ta.write(i, x)
        i, x = i + 1, x * 2
    return ta.stack()

@jax.jit
def jta_powers_below(limit):
    ta = jta.TensorArray(jnp.int32, size=0, dynamic_size=True, capacity=32, element_shape=())
    def body(c):
        i, x, ta = c
        return i + 1, x * 2, ta.write(i, x)
    _, _, ta = jax.lax.while_loop(lambda c: c[1] < limit, body, (0, 1, ta))
    return ta

ta = jta_powers_below(1000)
print(ta)
jta_powers = np.asarray(ta.stack())  # the size is concrete again outside jit
if HAVE_TF:
    tf_powers = tf.function(tf_powers_below)(tf.constant(1000)).numpy()
    np.testing.assert_array_equal(jta_powers, tf_powers)
    print("TF:  ", tf_powers)
print("jta: ", jta_powers)
"""),
    md("""
## Raw ops and TF's error texts

`jta.raw_ops` has TensorFlow's op names and semantics (write-once slots, `clear_after_read`,
aggregating gradient arrays) with an explicit `state` instead of TF's resource manager. Errors
carry TensorFlow's exception class and message text.
"""),
    code("""
from jta import raw_ops as ops

values = np.arange(6, dtype=np.float32).reshape(3, 2)

state = ops.new_state()
state, h, flow = ops.TensorArrayV3(state, 3, jnp.float32, element_shape=(2,), tensor_array_name="foo")
state, flow = ops.TensorArrayScatterV3(state, h, np.array([2, 0, 1]), values, flow)
state, jta_first = ops.TensorArrayReadV3(state, h, 0, flow, jnp.float32)
state, jta_rest = ops.TensorArrayGatherV3(state, h, np.array([1, 2]), flow, jnp.float32)
print("jta:", jta_first, jta_rest.tolist())
try:
    ops.TensorArrayReadV3(state, h, 0, flow, jnp.float32)
except jta.errors.InvalidArgumentError as e:
    jta_message = str(e)
    print("jta InvalidArgumentError:", jta_message)
"""),
    code(r"""
if HAVE_TF:
    handle, tf_flow = tf.raw_ops.TensorArrayV3(size=3, dtype=tf.float32, element_shape=[2], tensor_array_name="foo")
    tf_flow = tf.raw_ops.TensorArrayScatterV3(handle=handle, indices=[2, 0, 1], value=values, flow_in=tf_flow)
    tf_first = tf.raw_ops.TensorArrayReadV3(handle=handle, index=0, flow_in=tf_flow, dtype=tf.float32)
    tf_rest = tf.raw_ops.TensorArrayGatherV3(handle=handle, indices=[1, 2], flow_in=tf_flow, dtype=tf.float32)
    print("TF: ", tf_first.numpy(), tf_rest.numpy().tolist())
    np.testing.assert_array_equal(jta_first, tf_first.numpy())
    np.testing.assert_array_equal(jta_rest, tf_rest.numpy())
    try:
        tf.raw_ops.TensorArrayReadV3(handle=handle, index=0, flow_in=tf_flow, dtype=tf.float32)
    except tf.errors.InvalidArgumentError as e:
        tf_message = re.sub(r"^\{\{.*?\}\}\s*", "", e.message.split("[Op:")[0]).strip()  # drop TF's op context
        print("TF  InvalidArgumentError:", tf_message)
        # the runtime array name is TF's and jta's own; compare the text after it
        assert tf_message.split(":", 1)[1] == jta_message.split(":", 1)[1], (tf_message, jta_message)
        print("same message text")
else:
    print("skipped: TensorFlow is not installed")
"""),
    md("""
## Errors inside compiled code

In a `tf.function`, a bad index fails when the graph runs. In `jax.jit`, jta records it in the
returned array and `jta.throw` raises TensorFlow's error (see the quickstart notebook). Note that
a `tf.TensorArray` inside `tf.function` is backed by a TensorList, whose message differs from the
TensorArray kernel's; jta uses the kernel's text (the one `tf.raw_ops` and TF1 graphs give).
"""),
    code("""
@jax.jit
def write_at(i):
    return jta.TensorArray(jnp.float32, size=3, element_shape=()).write(i, 1.0)

try:
    jta.throw(write_at(5))
except jta.errors.InvalidArgumentError as e:
    print("jta:", e)

if HAVE_TF:
    @tf.function
    def tf_write_at(i):
        return tf.TensorArray(tf.float32, size=3, element_shape=[]).write(i, 1.0).stack()
    try:
        tf_write_at(tf.constant(5))
    except tf.errors.InvalidArgumentError as e:
        print("TF: ", next(line for line in e.message.splitlines() if "element" in line))
"""),
]

NOTEBOOKS = {
    "01_quickstart.ipynb": QUICKSTART,
    "02_gradients.ipynb": GRADIENTS,
    "03_porting_from_tensorflow.ipynb": PORTING,
}


def _is_log_noise(text: str) -> bool:
    noise = ("absl::InitializeLog", "oneDNN custom operations", "AutoGraph could not transform")
    return all(any(n in line for n in noise) or not line.strip() or line.startswith(("Cause:", "To silence"))
               for line in text.splitlines())


def build(execute: bool) -> None:
    for name, cells in NOTEBOOKS.items():
        nb = new_notebook(cells=cells, metadata={
            "kernelspec": {"display_name": "Python 3", "language": "python", "name": "python3"},
            "language_info": {"name": "python"},
        })
        if execute:
            from nbclient import NotebookClient

            NotebookClient(nb, timeout=120, kernel_name="python3",
                           resources={"metadata": {"path": str(HERE)}}).execute()
            for cell in nb.cells:
                cell.metadata.pop("execution", None)
                if cell.cell_type == "code":  # drop TensorFlow's start-up log lines
                    cell.outputs = [o for o in cell.outputs if not (
                        o.output_type == "stream" and o.name == "stderr" and _is_log_noise(o.text))]
        nbformat.validate(nb)
        nbformat.write(nb, HERE / name)
        print(f"wrote {name} ({(HERE / name).stat().st_size // 1024} KB)")


if __name__ == "__main__":
    build(execute="--execute" in sys.argv)
