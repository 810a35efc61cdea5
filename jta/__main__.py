"""``python -m jta``: an RNN written into a TensorArray inside ``lax.scan``, differentiated."""

from __future__ import annotations

import argparse
import time

import jax
import jax.numpy as jnp
import numpy as np

import jta


def rnn(params: dict[str, jax.Array], xs: jax.Array) -> jax.Array:
    """A tanh RNN whose hidden states are collected in a TensorArray, then stacked."""
    steps, batch, _ = xs.shape
    hidden = params["W_hh"].shape[0]
    inputs = jta.TensorArray(jnp.float32, size=steps).unstack(xs)
    outputs = jta.TensorArray(jnp.float32, size=steps, element_shape=(batch, hidden))

    def step(carry, t):
        h, out = carry
        h = jnp.tanh(inputs.read(t) @ params["W_xh"] + h @ params["W_hh"] + params["b"])
        return (h, out.write(t, h)), None

    (_, outputs), _ = jax.lax.scan(step, (jnp.zeros((batch, hidden)), outputs), jnp.arange(steps))
    return outputs.stack()


def rnn_reference(params: dict[str, jax.Array], xs: jax.Array) -> jax.Array:
    """The same RNN with scan's own stacked outputs, for comparison."""
    def step(h, x):
        h = jnp.tanh(x @ params["W_xh"] + h @ params["W_hh"] + params["b"])
        return h, h

    _, hs = jax.lax.scan(step, jnp.zeros((xs.shape[1], params["W_hh"].shape[0])), xs)
    return hs


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m jta",
        description="Demo: a tanh RNN whose hidden states are written into a jta.TensorArray inside "
                    "lax.scan, differentiated and compared with a hand-written lax.scan.")
    parser.add_argument("--steps", type=int, default=200, help="sequence length T (default: %(default)s)")
    parser.add_argument("--batch", type=int, default=8, help="batch size (default: %(default)s)")
    parser.add_argument("--width", type=int, default=64, help="hidden width of the RNN (default: %(default)s)")
    args = parser.parse_args(argv)
    for name in ("steps", "batch", "width"):
        if getattr(args, name) < 1:
            parser.error(f"--{name} must be at least 1")
    return args


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    steps, batch, features, hidden = args.steps, args.batch, 16, args.width
    k1, k2, k3 = jax.random.split(jax.random.PRNGKey(0), 3)
    params = {
        "W_xh": jax.random.normal(k1, (features, hidden)) / np.sqrt(features),
        "W_hh": jax.random.normal(k2, (hidden, hidden)) / np.sqrt(hidden),
        "b": jnp.zeros(hidden),
    }
    xs = jax.random.normal(k3, (steps, batch, features))

    def loss(fn):
        return lambda p: jnp.mean(fn(p, xs) ** 2)

    print(f"jta {jta.__version__} on {jax.devices()[0].platform}: a {hidden}-wide tanh RNN, "
          f"{steps} steps, batch {batch}")
    value_and_grad = jax.jit(jax.value_and_grad(loss(rnn)))
    reference = jax.jit(jax.value_and_grad(loss(rnn_reference)))
    (value, grads), (ref_value, ref_grads) = value_and_grad(params), reference(params)
    start = time.perf_counter()
    jax.block_until_ready(value_and_grad(params))
    elapsed = (time.perf_counter() - start) * 1e3

    hs = jax.jit(rnn)(params, xs)
    print(f"  outputs stacked from the TensorArray: shape {tuple(hs.shape)}, "
          f"h[-1, 0, :4] = {np.round(np.asarray(hs[-1, 0, :4]), 4)}")
    print(f"  loss = mean(h**2) = {float(value):.6f}   (hand-written lax.scan: {float(ref_value):.6f})")
    for name in params:
        diff = float(jnp.max(jnp.abs(grads[name] - ref_grads[name])))
        print(f"  d loss / d {name:5s} norm {float(jnp.linalg.norm(grads[name])):.6f}   "
              f"max |jta - scan| = {diff:.2e}")
    print(f"  jitted value_and_grad through the TensorArray: {elapsed:.2f} ms")

    ta = jax.jit(lambda i: jta.TensorArray(jnp.float32, size=3, element_shape=()).write(i, 1.0))(7)
    try:
        jta.throw(ta)
    except jta.errors.InvalidArgumentError as err:
        print(f"  an out-of-range write inside jit, raised by jta.throw: InvalidArgumentError: {err}")


if __name__ == "__main__":
    main()
