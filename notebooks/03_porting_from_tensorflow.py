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
# # Porting from TensorFlow
#
# A TensorFlow `TensorArray` loop and its jta twin, side by side, with results compared.
# TensorFlow cells run only when TensorFlow is installed (`HAVE_TF`); without it they are skipped
# and the jta cells still run.
#
# | TensorFlow | jta |
# |---|---|
# | `ta = ta.write(i, v)` (returns a new object; in eager mode it mutates) | `ta = ta.write(i, v)` (always a new value) |
# | `tf.while_loop` / `for t in tf.range(n)` in `tf.function` | `lax.scan`, `lax.fori_loop`, `lax.while_loop` in `jax.jit` |
# | `tf.GradientTape` / `tf.gradients` | `jax.grad` (or `jta.gradients` for TF's own backward rules) |
# | `tf.raw_ops.TensorArrayV3(...)` → handle, flow | `state, handle, flow = jta.raw_ops.TensorArrayV3(state, ...)` |
# | `dynamic_size=True` | `dynamic_size=True, capacity=N` to grow at traced indices |

# %%
import os
import re

os.environ["TF_CPP_MIN_LOG_LEVEL"] = "3"  # quiet TensorFlow's C++ logging
try:
    import tensorflow as tf
    HAVE_TF = True
except ImportError:
    tf = None
    HAVE_TF = False

import logging

import jax
import jax.numpy as jnp
import matplotlib.pyplot as plt
import numpy as np

import jta

logging.getLogger("jax._src.debugging").setLevel(logging.CRITICAL)  # errors raised in callbacks are shown below
print(f"jax {jax.__version__}, jta {jta.__version__}, {jax.devices()[0].platform}")

print("TensorFlow:", tf.__version__ if HAVE_TF else "not installed: TensorFlow cells are skipped")

# %% [markdown]
# ## An RNN loop
#
# The same recurrence `h_t = tanh(W h_{t-1} + U x_t)`, collecting the states in a TensorArray.

# %%
steps, hidden, features = 20, 4, 3
rng = np.random.default_rng(0)
W_np = (rng.normal(size=(hidden, hidden)) / 2).astype(np.float32)
U_np = rng.normal(size=(hidden, features)).astype(np.float32)
xs_np = rng.normal(size=(steps, features)).astype(np.float32)

# %%
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


# %%
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


# %% [markdown]
# ## Gradients: `tf.GradientTape` vs `jax.grad`

# %%
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

# %%
fig, ax = plt.subplots(figsize=(7, 2.5))
ax.plot(np.linalg.norm(jta_dxs, axis=1), "o-", label="jta (jax.grad)")
if HAVE_TF:
    ax.plot(np.linalg.norm(tf_dxs.numpy(), axis=1), "x--", label="TensorFlow (GradientTape)")
ax.set(xlabel="step t", ylabel="|dL/dx_t|", title="per-step input gradients")
ax.legend()
plt.show()


# %% [markdown]
# ## A loop of unknown length: `dynamic_size`
#
# TensorFlow grows a `dynamic_size` array freely. In JAX buffer shapes are static, so a jta array
# that grows at traced indices needs a `capacity`; the logical size is carried as a traced value.

# %%
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

# %% [markdown]
# ## Raw ops and TF's error texts
#
# `jta.raw_ops` has TensorFlow's op names and semantics (write-once slots, `clear_after_read`,
# aggregating gradient arrays) with an explicit `state` instead of TF's resource manager. Errors
# carry TensorFlow's exception class and message text.

# %%
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

# %%
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


# %% [markdown]
# ## Errors inside compiled code
#
# In a `tf.function`, a bad index fails when the graph runs. In `jax.jit`, jta records it in the
# returned array and `jta.throw` raises TensorFlow's error (see the quickstart notebook). Note that
# a `tf.TensorArray` inside `tf.function` is backed by a TensorList, whose message differs from the
# TensorArray kernel's; jta uses the kernel's text (the one `tf.raw_ops` and TF1 graphs give).

# %%
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


# %% [markdown]
# ## Running a whole TF1 graph: `jta.import_graph_def`
#
# A graph built with `tf.compat.v1` and control flow v1 (here a `while_loop` over a TensorArray,
# with `tf.gradients`, which adds `TensorArrayGradV3` and the v1 gradient stacks) runs as a pure
# JAX function: TensorFlow only parses it. `jax.grad` of the imported forward graph agrees with
# TensorFlow's own gradient graph.

# %%
if HAVE_TF:
    cf_v2 = tf.compat.v1.control_flow_v2_enabled()
    tf.compat.v1.disable_control_flow_v2()  # TF1 frames: Enter/Merge/Switch/NextIteration/Exit
    g = tf.Graph()
    with g.as_default():
        gx = tf.compat.v1.placeholder(tf.float32, [4, 3], name="x")
        gta = tf.TensorArray(tf.float32, size=4).unstack(gx)
        _, gh = tf.compat.v1.while_loop(lambda t, h: t < 4, lambda t, h: (t + 1, tf.tanh(gta.read(t) + h)),
                                        [tf.constant(0), tf.zeros([3])])
        gloss = tf.reduce_sum(gh * gh, name="loss")
        (gdx,) = tf.gradients(gloss, [gx])
    if cf_v2:
        tf.compat.v1.enable_control_flow_v2()
    f = jta.import_graph_def(g.as_graph_def(), inputs=["x:0"], outputs=["loss:0", gdx.name])
    xv = np.linspace(-1, 1, 12, dtype=np.float32).reshape(4, 3)
    loss_value, tf_grad = jax.jit(f)(xv)
    forward = jta.import_graph_def(g.as_graph_def(), inputs=["x:0"], outputs=["loss:0"])
    np.testing.assert_allclose(jax.grad(lambda v: forward(v)[0])(xv), tf_grad, rtol=1e-5, atol=1e-6)
    print("loss", float(loss_value), "| jax.grad of the imported forward graph == TF's gradient graph")
else:
    print("skipped: TensorFlow is not installed")
