# ---
# jupyter:
#   jupytext:
#     formats: ipynb,py:percent
#     text_representation:
#       extension: .py
#       format_name: percent
#       format_version: '1.3'
#       jupytext_version: 1.19.6
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # jta quickstart
#
# `jta.TensorArray` is TensorFlow's `TensorArray` as an immutable JAX pytree: every mutator
# (`write`, `scatter`, `unstack`, `split`, `close`) returns a **new** array, so it can be carried
# through `jax.jit`, `lax.scan`, `lax.while_loop`, `vmap` and `grad`.
#
# This notebook covers: the basics and the repr, a TensorArray in `lax.scan`,
# `stack`/`gather`/`concat`/`split`, arrays that grow inside `jit`, and how errors are checked
# inside compiled code (`jta.throw`).

# %%
import logging

import jax
import jax.numpy as jnp
import matplotlib.pyplot as plt
import numpy as np

import jta

logging.getLogger("jax._src.debugging").setLevel(logging.CRITICAL)  # errors raised in callbacks are shown below
print(f"jax {jax.__version__}, jta {jta.__version__}, {jax.devices()[0].platform}")

# %% [markdown]
# ## A TensorArray is a value
#
# Writing returns a new array; the old one is unchanged. The repr shows the slots: `W` written,
# `.` empty (the legend lists the other states). In Jupyter an array renders as a coloured strip.

# %%
ta = jta.TensorArray(jnp.float32, size=4, element_shape=(2,), tensor_array_name="demo")
ta2 = ta.write(0, jnp.array([1.0, 2.0])).write(2, jnp.array([3.0, 4.0]))
print(ta)  # unchanged
ta2

# %%
print("read(2) =", ta2.read(2), "  read(1) =", ta2.read(1), "(unwritten slots of known shape read as zeros)")
print("stack() =\n", ta2.stack())


# %% [markdown]
# ## In `lax.scan`: a small RNN
#
# The inputs are unstacked into one array and read back at the (traced) step index; the hidden
# states are written into another. Both arrays are ordinary pytrees in the scan carry or closure.

# %%
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

# %%
fig, ax = plt.subplots(figsize=(7, 2.5))
ax.plot(out.stack())
ax.set(xlabel="step t", ylabel="h_t", title="hidden states written into the TensorArray")
plt.show()

# %% [markdown]
# ## `gather`, `scatter`, `concat`, `split`

# %%
print("gather([0, 5, 10]) shape:", out.gather(jnp.array([0, 5, 10])).shape)
sc = jta.TensorArray(jnp.float32, size=4, element_shape=(2,)).scatter(jnp.array([3, 0]), jnp.ones((2, 2)))
sc

# %% [markdown]
# Without a fully known element shape, elements may differ in their first dimension
# (`infer_shape=False`): `split` with concrete lengths makes a *ragged* array, `concat` joins it
# back. Inside `jit`, traced lengths must split into equal pieces.

# %%
words = jta.TensorArray(jnp.int32, size=3, infer_shape=False).split(jnp.arange(6), [1, 3, 2])
print(words)
print("read(1) =", words.read(1), "  concat() =", words.concat())

equal = jax.jit(lambda v, n: jta.TensorArray(jnp.float32, size=3).split(v, n).concat())
print("inside jit:", equal(jnp.arange(6.0), jnp.array([2, 2, 2])))


# %% [markdown]
# ## Growing inside `jit`: `dynamic_size=True` with a `capacity`
#
# Buffer shapes must be static in JAX, so an array that grows at traced indices gets a static
# slot budget (`capacity=`); its logical size is a traced leaf. Here: the Collatz sequence of
# `n`, whose length is only known at run time, collected in a `lax.while_loop`.

# %%
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

# %% [markdown]
# ## Errors, and how checks work inside `jit`
#
# Problems that are known while tracing (shapes, dtypes, Python-int indices) raise immediately,
# with TensorFlow's exception class and message:

# %%
try:
    ta.write(7, jnp.zeros(2))
except jta.errors.InvalidArgumentError as e:
    print("InvalidArgumentError:", e)

try:
    ta.write(0, jnp.zeros(3))
except ValueError as e:
    print("ValueError:", e)


# %% [markdown]
# An index computed inside `jit` is a tracer: nothing can raise while tracing. jta instead
# **records** the problem in the array's pytree (an error record plus a bitfield per
# slot). The returned array shows the recorded error, and `jta.throw` raises it with
# TensorFlow's class and text:

# %%
@jax.jit
def put(ta, i, value):
    return ta.write(i, value)


bad = put(ta, 7, jnp.zeros(2))  # no exception: the error is recorded
bad

# %%
try:
    jta.throw(bad)  # works on any pytree holding TensorArrays
except jta.errors.InvalidArgumentError as e:
    print("InvalidArgumentError:", e)


# %% [markdown]
# `jta.checked` does this for you: it compiles the function with every check threaded through it
# as data (arrays it returns or drops, reads inside loops, under `vmap` and `grad`) and raises
# TensorFlow's first error, in program order, as jta's class:

# %%
checked_put = jta.checked(put)
try:
    checked_put(ta, 7, jnp.zeros(2))
except jta.errors.InvalidArgumentError as e:
    print("InvalidArgumentError:", e)


# %% [markdown]
# Per-slot errors (writing a slot twice, writing after a read, reading a cleared slot) set sticky
# bits of that slot, shown as `!` in the strip:

# %%
def write_twice(ta, i):
    return ta.write(i, jnp.ones(2)).write(i, jnp.ones(2))

twice = jax.jit(write_twice)(ta, 1)
print(twice)


# %% [markdown]
# `jta.checkify` gives that first error as data instead, a `jta.ErrorRecord` returned beside the
# value: no host callback and no branch, so the function can be jitted, exported with
# `jax.export`, and its error raised later with `jta.throw`:

# %%
def read_past(i):
    return jta.TensorArray(jnp.float32, size=3, element_shape=()).unstack(jnp.arange(3.0)).read(i)


errors, value = jax.jit(jta.checkify(read_past))(5)
print(errors)

# %% [markdown]
# Under a bare `jax.jit` (no `checked`, no `checkify`) the value-returning methods (`read`,
# `stack`, `gather`, `concat`) still raise at run time, from a host callback that runs only if an
# error was recorded: the debugging mode. JAX reports it as a `JaxRuntimeError` whose message
# carries jta's class and text. Printing an array while tracing is safe too: its leaves are shown
# as `traced`.

# %%
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

# %% [markdown]
# `TensorArray(..., checks=False)` drops all of this bookkeeping for maximum speed: indices are
# not range-checked and writing a slot twice is undefined.
#
# ## `vmap` and `grad`
#
# A TensorArray program is an ordinary JAX function, so it batches and differentiates:

# %%
batched = jax.vmap(lambda shift: rnn(W, U, xs + shift).stack())(jnp.linspace(-1, 1, 8))
print("vmap over 8 input shifts:", batched.shape)

def loss(W):
    return jnp.sum(rnn(W, U, xs).stack() ** 2)


def loss_reference(W):
    return jnp.sum(rnn_reference(W, U, xs) ** 2)


g = jax.jit(jax.grad(loss))(W)
np.testing.assert_allclose(g, jax.grad(loss_reference)(W), rtol=1e-4, atol=1e-5)
print("grad through the TensorArray matches the plain scan; |dL/dW| =", float(jnp.linalg.norm(g)))
