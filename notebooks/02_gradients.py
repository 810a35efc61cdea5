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
# # TensorFlow's gradient machinery in jta
#
# `jax.grad` differentiates TensorArray programs directly. `jta.gradients` additionally
# reproduces how **TensorFlow** differentiates them, step by step: for a forward array and a
# *gradient source* (one per `tf.gradients` call), `TensorArrayGradV3` creates an aggregating
# **accumulator**; the backward rules write partial gradients into it (read → write,
# gather → scatter, concat → split) and read totals out (write → read, scatter → gather,
# split → concat). That is what you need to port a hand-written TF backward pass, or to use
# `TensorArrayGradWithShape`.
#
# jta keeps TF's hidden per-session state explicit: a **registry**, a plain dict
# `{(forward name, source): accumulator}` threaded through your code (it is a pytree).

# %%
import logging

import jax
import jax.numpy as jnp
import matplotlib.pyplot as plt
import numpy as np

import jta
from jta import gradients

logging.getLogger("jax._src.debugging").setLevel(logging.CRITICAL)  # errors raised in callbacks are shown below
print(f"jax {jax.__version__}, jta {jta.__version__}, {jax.devices()[0].platform}")

# %% [markdown]
# ## A forward program and its TF-style backward pass
#
# The forward pass unstacks `xs` into an array and reads each element: `y_t = tanh(w * x_t)`,
# `loss = sum(y^2)`. TensorFlow's backward pass for `read` writes the cotangent into the
# accumulator (`read_grad`); the backward pass for `unstack` gathers all totals (`unstack_grad`).

# %%
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
        registry = gradients.read_grad(registry, ta, t, dread, source=source)
    registry, dxs = gradients.unstack_grad(registry, ta, source=source)
    return registry, dxs


registry, dxs = jax.jit(backward)(xs, w)
np.testing.assert_allclose(dxs, jax.grad(loss)(xs, w), rtol=1e-5, atol=1e-6)
print("TF-style backward pass == jax.grad")
jta.describe(registry)

# %% [markdown]
# The accumulator of `('xs', 'gradients')` was written at every slot and then read (and cleared)
# by `unstack_grad`, TensorFlow's `clear_after_read` semantics for gradient arrays (`c`).
#
# ## Sources: two gradient computations without double counting
#
# Each `tf.gradients` call gets its own source (`gradients`, `gradients_1`, …; `G.grad_source`
# extracts it from an op name). Two backward passes over the same forward array that share a
# registry stay independent if their sources differ. With one shared source they add up in one
# accumulator: the gradient of one loss would include the other's.

# %%
print(gradients.grad_source("gradients_1/while/TensorArrayReadV3_grad/foo"))

reg = {}
reg, d_a = backward(xs, w, c=1.0, source="gradients", registry=reg)
reg, d_b = backward(xs, w, c=3.0, source="gradients_1", registry=reg)
np.testing.assert_allclose(d_a, jax.grad(loss)(xs, w, 1.0), rtol=1e-5, atol=1e-6)
np.testing.assert_allclose(d_b, jax.grad(loss)(xs, w, 3.0), rtol=1e-5, atol=1e-6)
print("two sources, one registry: each gradient is its own loss's gradient")
jta.describe(reg)


# %%
ta, ys = forward(xs, w)  # one forward array, two backward passes over it


def accumulate(registry, c, source):  # the read gradients only, no read-out yet
    for t in range(T):
        registry = gradients.read_grad(registry, ta, t, 2 * c * ys[t] * w * (1 - ys[t] ** 2), source=source)
    return registry


shared = accumulate({}, 1.0, "gradients")
shared = accumulate(shared, 3.0, "gradients")          # the same source: both land in one accumulator
shared, mixed = gradients.unstack_grad(shared, ta, source="gradients")
np.testing.assert_allclose(mixed, d_a + d_b, rtol=1e-5, atol=1e-6)
print("one shared source mixes the two gradients: max |mixed - d_a| =", float(jnp.max(jnp.abs(mixed - d_a))))

# %% [markdown]
# The same accumulators exist in `jta.raw_ops`, keyed inside the explicit `State` (TF's
# `TensorArrayGradV3(handle, flow, source)`); the state's repr lists which accumulators exist
# for which sources:

# %%
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

# %% [markdown]
# A new accumulator starts with the forward array's `W` marks: like TensorFlow, it soft-copies
# the forward element shapes, so a slot that nothing was written into reads as zeros. Slot 2 of
# `gradients` was aggregated twice and then read, which cleared it (`c`).

# %% [markdown]
# ## `TensorArrayGradWithShape`: many gradients in one accumulator
#
# `shape_to_prepend=(K,)` gives accumulator elements of shape `(K, *element_shape)`: K cotangents
# travel through one backward pass (TF uses this for `pfor`/Jacobians). Below, K weighted losses
# `L_k = sum(C[k] * y^2)` are differentiated at once, and compared with `vmap` over K single
# backward passes and with `vmap(jax.grad)`.

# %%
K = 4
C = jax.random.uniform(kc, (K, T, D))


def backward_with_shape(xs, w, C):
    ta, ys = forward(xs, w)
    registry = {}
    for t in reversed(range(T)):
        dread = 2 * C[:, t] * ys[t] * w * (1 - ys[t] ** 2)          # (K, D): K cotangents
        registry = gradients.read_grad(registry, ta, t, dread, source="gradients", shape_to_prepend=(K,))
    registry, d = gradients.unstack_grad(registry, ta, source="gradients", shape_to_prepend=(K,))
    return registry, jnp.moveaxis(d, 1, 0)                           # (T, K, D) -> (K, T, D)


registry, d_with_shape = jax.jit(backward_with_shape)(xs, w, C)
d_vmap = jax.vmap(lambda c: backward(xs, w, c)[1])(C)               # K backward passes, batched
d_jax = jax.vmap(jax.grad(loss), in_axes=(None, None, 0))(xs, w, C)
np.testing.assert_allclose(d_with_shape, d_jax, rtol=1e-5, atol=1e-6)
np.testing.assert_allclose(d_vmap, d_jax, rtol=1e-5, atol=1e-6)
print("GradWithShape == vmap(TF-style backward) == vmap(jax.grad); shape", d_with_shape.shape)
registry[("xs", "gradients")]

# %% [markdown]
# ## Per-step gradients of an RNN (`vmap` over many gradients)
#
# How much does the final state of a tanh RNN depend on the input at step `t`? `jax.grad`
# through the TensorArray program gives `dL/dx_t` for every step; `vmap` runs it for several
# recurrent scales at once. Small scales forget (vanishing gradients), large ones remember.

# %%
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
