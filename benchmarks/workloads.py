"""The benchmarked workloads: one 64-wide tanh RNN step, ``h = tanh(h @ W + x)``, in a loop.

Every workload is written once per *implementation* (peer):

* ``native``  – plain ``lax.scan`` with stacked outputs / scanned inputs (the baseline);
* ``naive``   – a buffer carried through the scan, written with ``.at[t].set`` (the obvious
  hand-rolled TensorArray; its reverse mode copies the whole buffer every step);
* ``jta``     – :class:`jta.TensorArray` carried through the scan;
* ``raw``     – :mod:`jta.raw_ops` with the explicit state carried through the scan;
* ``tf`` / ``tf_xla`` – ``tf.TensorArray`` inside ``tf.function`` (without / with
  ``jit_compile=True``), W1 only, when TensorFlow is importable.

Extra peers: ``jta_nochecks`` (``checks=False``, in W1-W3; W5 compares it with ``jta`` in W1) and,
in W3, ``jta_xla_region`` (jta compiled with XLA:CPU's copy-insertion region analysis switched on).

Each builder ``build_*(T)`` returns ``{impl: (fn, args)}`` where ``fn(*args)`` runs the compiled
computation once and returns its output (a pytree, blocked on by the timer). Every function takes
``(W, xs)`` and the JAX ones are ``jax.jit``-compiled once per ``T`` (``lax.scan`` compiles in time
independent of ``T``).

Workloads
---------
W1  write ``h_t`` to an array every step, then ``stack()``            – forward and ``jax.grad``
W2  ``unstack`` the inputs into an array, ``read(t)`` every step        – forward and ``jax.grad``
W3  read-after-write: step ``t`` reads slot ``t-1`` of the array it writes (a decoder feeding back
    its output; the array is carried in the scan)                      – ``jax.grad``
W4  ``k = 16`` gradients of W1 at once: ``vmap`` of the VJP over 16 cotangents vs 16 sequential VJP
    calls, and the ``TensorArrayGradWithShape(shape_to_prepend=[16])`` raw-op route
W5  W1 with ``checks=True`` (``jta``) vs ``checks=False`` (``jta_nochecks``) – measured within W1

W1u, W2u, W3u  W1-W3 unbatched: ``h`` has shape ``(64,)`` (``xs [T, 64]``), so a step is one 64x64
    matrix-vector product and every extra per-step operation shows (``build_*(T, ..., batch=None)``)

Compile time (``compile_cases``): ``jax.jit(jax.value_and_grad(loss))`` of a T-step RNN written as
a new user would (a TensorArray written in ``lax.scan``, then stacked; ``loss = mean(h**2)``)
vs the same with ``lax.scan``'s stacked outputs; ``.lower(...).compile()`` from cleared caches.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

import jta
from jta import raw_ops as ops

BATCH = 16
HIDDEN = 64
UNBATCHED = None  # ``batch=UNBATCHED``: no batch axis, ``h`` has shape ``(HIDDEN,)``
K_GRADS = 16  # W4: number of cotangents

Case = tuple[Callable[..., Any], tuple[Any, ...]]


# ----------------------------------------------------------------------------------------------
# data
# ----------------------------------------------------------------------------------------------
def make_inputs(T: int, seed: int = 0, batch: int | None = BATCH) -> tuple[jax.Array, jax.Array]:
    """``W [H, H]`` (spectral radius < 1, so gradients stay finite) and ``xs [T, B, H]``
    (``xs [T, H]`` when ``batch`` is ``None``)."""
    kw, kx = jax.random.split(jax.random.PRNGKey(seed))
    W = 0.9 * jax.random.normal(kw, (HIDDEN, HIDDEN), jnp.float32) / np.sqrt(HIDDEN)
    shape = (T, HIDDEN) if batch is None else (T, batch, HIDDEN)
    xs = 0.5 * jax.random.normal(kx, shape, jnp.float32)
    return jax.block_until_ready(W), jax.block_until_ready(xs)


def make_cotangents(T: int, k: int = K_GRADS, seed: int = 1) -> jax.Array:
    """``k`` cotangents of W1's output, ``[k, T, B, H]``."""
    return jax.block_until_ready(
        jax.random.normal(jax.random.PRNGKey(seed), (k, T, BATCH, HIDDEN), jnp.float32))


def cell(W: jax.Array, h: jax.Array, x: jax.Array) -> jax.Array:
    return jnp.tanh(h @ W + x)


def _h0(xs: jax.Array) -> jax.Array:
    return jnp.zeros(xs.shape[1:], xs.dtype)


def loss_of(f: Callable[..., jax.Array]) -> Callable[..., jax.Array]:
    return lambda W, xs: jnp.sum(f(W, xs) ** 2)


def grad_of(f: Callable[..., jax.Array]) -> Callable[..., Any]:
    """Gradient w.r.t. both ``W`` and ``xs`` (``xs`` matters for W2: it flows through reads)."""
    return jax.grad(loss_of(f), argnums=(0, 1))


# ----------------------------------------------------------------------------------------------
# W1: write every step, then stack
# ----------------------------------------------------------------------------------------------
def w1_native(W, xs):
    def step(h, x):
        h = cell(W, h, x)
        return h, h

    return lax.scan(step, _h0(xs), xs)[1]


def w1_naive(W, xs):
    def step(carry, tx):
        h, buf = carry
        t, x = tx
        h = cell(W, h, x)
        return (h, buf.at[t].set(h)), None

    (_, buf), _ = lax.scan(step, (_h0(xs), jnp.zeros_like(xs)), (jnp.arange(xs.shape[0]), xs))
    return buf


def w1_jta(W, xs, checks=True):
    ta = jta.TensorArray(jnp.float32, size=xs.shape[0], element_shape=xs.shape[1:], checks=checks)

    def step(carry, tx):
        h, ta = carry
        t, x = tx
        h = cell(W, h, x)
        return (h, ta.write(t, h)), None

    (_, ta), _ = lax.scan(step, (_h0(xs), ta), (jnp.arange(xs.shape[0]), xs))
    return ta.stack()


def w1_raw(W, xs, checks=True):
    T = xs.shape[0]
    state, handle, flow = ops.TensorArrayV3(ops.new_state(), T, jnp.float32, element_shape=xs.shape[1:],
                                            checks=checks)

    def step(carry, tx):
        h, state, flow = carry
        t, x = tx
        h = cell(W, h, x)
        state, flow = ops.TensorArrayWriteV3(state, handle, t, h, flow)
        return (h, state, flow), None

    (_, state, flow), _ = lax.scan(step, (_h0(xs), state, flow), (jnp.arange(T), xs))
    state, out = ops.TensorArrayGatherV3(state, handle, np.arange(T), flow, jnp.float32)
    jta.throw(state)  # raise recorded errors at run time, as jta.TensorArray.stack() does
    return out


W1 = {"native": w1_native, "naive": w1_naive, "jta": w1_jta, "raw": w1_raw}


# ----------------------------------------------------------------------------------------------
# W2: unstack the inputs, read every step (returns the final state)
# ----------------------------------------------------------------------------------------------
def w2_native(W, xs):
    return lax.scan(lambda h, x: (cell(W, h, x), None), _h0(xs), xs)[0]


def w2_naive(W, xs):
    def step(carry, t):
        h, buf = carry
        return (cell(W, h, lax.dynamic_index_in_dim(buf, t, 0, keepdims=False)), buf), None

    (h, _), _ = lax.scan(step, (_h0(xs), xs), jnp.arange(xs.shape[0]))
    return h


def w2_jta(W, xs, checks=True):
    ta = jta.TensorArray(jnp.float32, size=xs.shape[0], element_shape=xs.shape[1:], checks=checks).unstack(xs)

    def step(h, t):
        return cell(W, h, ta.read(t)), None

    return lax.scan(step, _h0(xs), jnp.arange(xs.shape[0]))[0]


def w2_raw(W, xs, checks=True):
    T = xs.shape[0]
    state, handle, flow = ops.TensorArrayV3(ops.new_state(), T, jnp.float32, element_shape=xs.shape[1:],
                                            checks=checks)
    state, flow = ops.TensorArrayScatterV3(state, handle, np.arange(T), xs, flow)

    def step(carry, t):
        h, state = carry
        state, x = ops.TensorArrayReadV3(state, handle, t, flow, jnp.float32)  # clears the slot
        return (cell(W, h, x), state), None

    (h, state), _ = lax.scan(step, (_h0(xs), state), jnp.arange(T))
    jta.throw(state)
    return h


W2 = {"native": w2_native, "naive": w2_naive, "jta": w2_jta, "raw": w2_raw}


# ----------------------------------------------------------------------------------------------
# W3: read-after-write (slot 0 holds h0; step t = 1..T reads slot t-1 and writes slot t)
# ----------------------------------------------------------------------------------------------
def w3_native(W, xs):
    def step(h, x):
        h = cell(W, h, x)
        return h, h

    h0 = _h0(xs)
    return jnp.concatenate([h0[None], lax.scan(step, h0, xs)[1]])


def w3_naive(W, xs):
    T = xs.shape[0]

    def step(buf, tx):
        t, x = tx
        h = cell(W, lax.dynamic_index_in_dim(buf, t - 1, 0, keepdims=False), x)
        return buf.at[t].set(h), None

    buf = jnp.zeros((T + 1, *xs.shape[1:]), xs.dtype)
    return lax.scan(step, buf, (jnp.arange(1, T + 1), xs))[0]


def w3_jta(W, xs, checks=True):
    T = xs.shape[0]
    ta = jta.TensorArray(jnp.float32, size=T + 1, element_shape=xs.shape[1:], checks=checks)
    ta = ta.write(0, _h0(xs))

    def step(ta, tx):
        t, x = tx
        return ta.write(t, cell(W, ta.read(t - 1), x)), None

    return lax.scan(step, ta, (jnp.arange(1, T + 1), xs))[0].stack()


def w3_raw(W, xs, checks=True):
    T = xs.shape[0]
    state, handle, flow = ops.TensorArrayV3(ops.new_state(), T + 1, jnp.float32, element_shape=xs.shape[1:],
                                            clear_after_read=False, checks=checks)
    state, flow = ops.TensorArrayWriteV3(state, handle, 0, _h0(xs), flow)

    def step(carry, tx):
        state, flow = carry
        t, x = tx
        state, h = ops.TensorArrayReadV3(state, handle, t - 1, flow, jnp.float32)
        state, flow = ops.TensorArrayWriteV3(state, handle, t, cell(W, h, x), flow)
        return (state, flow), None

    (state, flow), _ = lax.scan(step, (state, flow), (jnp.arange(1, T + 1), xs))
    state, out = ops.TensorArrayGatherV3(state, handle, np.arange(T + 1), flow, jnp.float32)
    jta.throw(state)
    return out


W3 = {"native": w3_native, "naive": w3_naive, "jta": w3_jta, "raw": w3_raw}


# ----------------------------------------------------------------------------------------------
# W4: k gradients of W1 at once
# ----------------------------------------------------------------------------------------------
def _vjp_parts(f):
    """(forward, one backward, vmapped backward), each jitted; the VJP closure is a pytree."""
    forward = jax.jit(lambda W, xs: jax.vjp(lambda W: f(W, xs), W)[1])
    backward = jax.jit(lambda vjp_fn, ct: vjp_fn(ct)[0])
    batched = jax.jit(lambda vjp_fn, cts: jax.vmap(vjp_fn)(cts)[0])
    return forward, backward, batched


def w4_sequential(f):
    forward, backward, _ = _vjp_parts(f)

    def run(W, xs, cts):
        vjp_fn = forward(W, xs)
        return [backward(vjp_fn, cts[k]) for k in range(cts.shape[0])]

    return run


def w4_batched(f):
    forward, _, batched = _vjp_parts(f)
    return lambda W, xs, cts: batched(forward(W, xs), cts)


def w4_raw_grad_with_shape(W, xs, cts, checks=True):
    """TensorFlow's batched-gradient route spelled out with raw ops.

    Forward: W1 with raw ops. Backward: a ``TensorArrayGradWithShape(shape_to_prepend=[k])``
    accumulator receives all ``k`` cotangents of the stacked output (the gather's gradient is a
    scatter into the gradient array), then a reverse scan reads one ``[k, B, H]`` slot per step
    (the write's gradient is a read) and backpropagates through the cell for all ``k`` at once.
    """
    T, k = xs.shape[0], cts.shape[0]
    state, handle, flow = ops.TensorArrayV3(ops.new_state(), T, jnp.float32, element_shape=xs.shape[1:],
                                            checks=checks)

    def fwd(carry, tx):
        h, state, flow = carry
        t, x = tx
        h = cell(W, h, x)
        state, flow = ops.TensorArrayWriteV3(state, handle, t, h, flow)
        return (h, state, flow), None

    (_, state, flow), _ = lax.scan(fwd, (_h0(xs), state, flow), (jnp.arange(T), xs))
    state, hs = ops.TensorArrayGatherV3(state, handle, np.arange(T), flow, jnp.float32)
    state, ghandle, gflow = ops.TensorArrayGradWithShape(state, handle, flow, [k], "gradients")
    state, gflow = ops.TensorArrayScatterV3(state, ghandle, np.arange(T), jnp.moveaxis(cts, 0, 1), gflow)
    h_prev = jnp.concatenate([_h0(xs)[None], hs[:-1]])

    def bwd(carry, t):
        dh, state = carry
        state, g = ops.TensorArrayReadV3(state, ghandle, t, gflow, jnp.float32)  # [k, B, H]
        h_t = lax.dynamic_index_in_dim(hs, t, 0, keepdims=False)
        dz = (dh + g) * (1.0 - h_t ** 2)
        return (dz @ W.T, state), dz

    init = (jnp.zeros((k, *xs.shape[1:])), state)
    (_, state), dz = lax.scan(bwd, init, jnp.arange(T), reverse=True)  # dz: [T, k, B, H]
    # dW for all k cotangents in one matmul after the loop (JAX's scan transpose instead adds a
    # [k, H, H] outer product into a carried accumulator every step, which is memory-bound).
    dW = jnp.einsum("tbi,tkbj->kij", h_prev, dz)
    jta.throw(state)
    return dW


# ----------------------------------------------------------------------------------------------
# TensorFlow (W1)
# ----------------------------------------------------------------------------------------------
def tensorflow() -> Any:
    """The ``tensorflow`` module, or ``None`` when it is not importable."""
    try:
        import os
        os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
        import tensorflow as tf  # noqa: PLC0415
    except Exception:  # pragma: no cover - optional peer
        return None
    return tf


def tf_w1(tf: Any, jit_compile: bool, grad: bool) -> Callable[..., Any]:
    """W1 as ``tf.TensorArray`` in a ``tf.function`` (forward, or gradient via ``GradientTape``)."""

    def forward(W, xs):
        T = tf.shape(xs)[0]
        # The inputs go through a TensorArray too, as in tf.scan / dynamic_rnn: the gradient of
        # ``xs[t]`` would be a dense [T, B, H] tensor per step, making TF's backward O(T^2).
        inputs = tf.TensorArray(tf.float32, size=T, element_shape=xs.shape[1:]).unstack(xs)
        ta = tf.TensorArray(tf.float32, size=T, element_shape=xs.shape[1:])
        h = tf.zeros(xs.shape[1:], tf.float32)
        for t in tf.range(T):
            h = tf.tanh(tf.matmul(h, W) + inputs.read(t))
            ta = ta.write(t, h)
        return ta.stack()

    def gradient(W, xs):
        with tf.GradientTape() as tape:
            tape.watch([W, xs])
            loss = tf.reduce_sum(forward(W, xs) ** 2)
        return tape.gradient(loss, [W, xs])

    fn = tf.function(gradient if grad else forward, jit_compile=jit_compile, reduce_retracing=False)

    def run(W, xs):
        out = fn(W, xs)
        return [o.numpy() for o in out] if isinstance(out, list) else out.numpy()

    return run


# ----------------------------------------------------------------------------------------------
# case builders: {impl: (callable, args)}
# ----------------------------------------------------------------------------------------------
# XLA:CPU option that lets copy insertion see through while-loop regions. Off by default; with it,
# XLA also removes the whole-buffer copies of read-after-write loops (W3). Shown as a peer only.
REGION_ANALYSIS = {"xla_cpu_copy_insertion_use_region_analysis": True}


def _jitted(fns: dict[str, Callable[..., Any]], grad: bool, T: int, batch: int | None = BATCH) -> dict[str, Case]:
    """Every peer under ``jax.jit``; ``jta`` as the README tells users to run it,
    ``jta.checked(jax.jit(f))`` (every check as data, raised after the call), and ``jta_jit`` the
    same function under a bare ``jax.jit`` (value ops check through a host callback)."""
    W, xs = make_inputs(T, batch=batch)
    cases = {name: (jax.jit(grad_of(f) if grad else f), (W, xs)) for name, f in fns.items()}
    if "jta" in cases:
        cases["jta_jit"] = cases["jta"]
        cases["jta"] = (jta.checked(cases["jta"][0]), (W, xs))
    return cases


def _with_nochecks(fns: dict[str, Callable[..., Any]], jta_fn: Callable[..., Any]) -> dict[str, Callable[..., Any]]:
    return {**fns, "jta_nochecks": functools.partial(jta_fn, checks=False)}


def build_w1(T: int, grad: bool, with_tf: bool = True, batch: int | None = BATCH) -> dict[str, Case]:
    """W1, plus ``jta_nochecks`` (``checks=False``: W5 compares it with ``jta``); the TensorFlow
    peers only with a batch axis."""
    cases = _jitted(_with_nochecks(W1, w1_jta), grad, T, batch)
    tf = tensorflow() if with_tf and batch is not None else None
    if tf is not None:
        W, xs = make_inputs(T)
        tW, txs = tf.constant(np.asarray(W)), tf.constant(np.asarray(xs))
        cases["tf"] = (tf_w1(tf, False, grad), (tW, txs))
        cases["tf_xla"] = (tf_w1(tf, True, grad), (tW, txs))
    return cases


def build_w2(T: int, grad: bool, batch: int | None = BATCH) -> dict[str, Case]:
    return _jitted(_with_nochecks(W2, w2_jta), grad, T, batch)


def build_w3(T: int, grad: bool = True, batch: int | None = BATCH) -> dict[str, Case]:
    cases = _jitted(_with_nochecks(W3, w3_jta), grad, T, batch)
    fn = grad_of(w3_jta) if grad else w3_jta
    cases["jta_xla_region"] = (jax.jit(fn, compiler_options=REGION_ANALYSIS), cases["jta"][1])
    return cases


def build_w4(T: int) -> dict[str, Case]:
    W, xs = make_inputs(T)
    cts = make_cotangents(T)
    args = (W, xs, cts)
    return {
        "native_vmap": (w4_batched(w1_native), args),  # the jacrev-style baseline
        "native_seq16": (w4_sequential(w1_native), args),
        "jta_vmap": (w4_batched(w1_jta), args),
        "jta_seq16": (w4_sequential(w1_jta), args),
        "raw_gradwithshape": (jax.jit(w4_raw_grad_with_shape), args),
    }


# ----------------------------------------------------------------------------------------------
# compile time: jit(value_and_grad) of an RNN written as a new user would
# ----------------------------------------------------------------------------------------------
def mean_square_loss(f: Callable[..., jax.Array]) -> Callable[..., jax.Array]:
    return lambda W, xs: jnp.mean(f(W, xs) ** 2)


def jitted_value_and_grad(f: Callable[..., jax.Array]) -> Callable[..., Any]:
    return jax.jit(jax.value_and_grad(mean_square_loss(f)))


def compile_cases(T: int = 1000) -> dict[str, tuple[Callable[[], Any], tuple[Any, ...]]]:
    """``{impl: (make, args)}``: ``make()`` returns a fresh ``jax.jit(jax.value_and_grad(loss))``
    (gradient w.r.t. ``W``) to be lowered and compiled with ``args`` (``W [H, H]``, ``xs [T, B, H]``).

    ``native`` is W1 with ``lax.scan``'s stacked outputs, ``jta`` the TensorArray written in the
    scan and stacked (``checks=True``, the default) as ``jta.checked`` compiles it
    (``jax.jit(jta.checkify(...))``), ``jta_jit`` the same under a bare ``jax.jit``, and
    ``jta_nochecks`` with ``checks=False``.
    """
    args = make_inputs(T)
    fns = {"native": w1_native, "jta_jit": w1_jta, "jta_nochecks": functools.partial(w1_jta, checks=False)}
    cases = {name: (functools.partial(jitted_value_and_grad, f), args) for name, f in fns.items()}
    cases["jta"] = (lambda: jax.jit(jta.checkify(jax.value_and_grad(mean_square_loss(w1_jta)))), args)
    return cases
