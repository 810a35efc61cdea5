"""``python -m benchmarks.tf2_train``: an imported Keras train step against TensorFlow's own call.

Issue 28's speed target: the train step of a ``tf_keras`` LSTM layer (batch 16, hidden 64, T 100,
32 inputs; the loss the mean square of its sequence output, the tape's gradients of every weight),
a ``tf.function`` with the ``GradientTape`` inside, imported with ``jta.import_function`` and run
under ``jax.jit``, at least as fast as the ``tf.function`` call itself. Also a GRU and a Keras 3
LSTM (TensorFlow backend). Times are interleaved medians (:mod:`benchmarks.timing`), each call
ending when its outputs are ready (TensorFlow's converted to NumPy); the jitted step's values are
checked against TensorFlow's first.

    python -m benchmarks.tf2_train                       # batch 16, hidden 64, T 100
    python -m benchmarks.tf2_train --batch 64 --hidden 256 --out /tmp/tf2_train.json
"""

from __future__ import annotations

import argparse
import json
import os
import platform
from typing import Any

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import jax  # noqa: E402
import numpy as np  # noqa: E402

import jta  # noqa: E402

from .timing import time_interleaved  # noqa: E402


def _layer(kind: str, hidden: int) -> Any:
    if kind == "keras3_lstm":
        import keras

        keras.utils.set_random_seed(0)
        return keras.layers.LSTM(hidden, return_sequences=True)
    import tf_keras

    tf_keras.utils.set_random_seed(0)
    return getattr(tf_keras.layers, kind.upper())(hidden, return_sequences=True)


def train_step(kind: str, batch: int, hidden: int, steps: int, inputs: int) -> tuple[Any, np.ndarray]:
    """The ``tf.function`` train step of one layer, and its example input."""
    import tensorflow as tf

    layer = _layer(kind, hidden)
    x = np.random.default_rng(0).normal(size=(batch, steps, inputs)).astype(np.float32)
    layer(x)
    weights = list(layer.trainable_variables)

    @tf.function
    def step(x: Any) -> Any:
        with tf.GradientTape() as tape:
            loss = tf.reduce_mean(tf.square(layer(x)))
        return loss, tape.gradient(loss, weights)
    return step, x


def measure(kind: str, batch: int, hidden: int, steps: int, inputs: int, repeats: int) -> dict[str, Any]:
    step, x = train_step(kind, batch, hidden, steps, inputs)
    jax_fn, params = jta.import_function(step, x)
    jitted = jax.jit(jax_fn)
    want = jax.tree_util.tree_map(np.asarray, step(x))
    got = jitted(params, x)
    for a, b in zip(jax.tree_util.tree_leaves(got), jax.tree_util.tree_leaves(want), strict=True):
        np.testing.assert_allclose(np.asarray(a), b, rtol=2e-4, atol=2e-5)

    def tf_call(x: Any) -> Any:
        return [np.asarray(v) for v in jax.tree_util.tree_leaves(step(x))]

    timings = time_interleaved({"tf.function": (tf_call, (x,)), "jta jit": (jitted, (params, x))}, repeats,
                               keep_output=False)
    tf_s, jta_s = timings["tf.function"].median, timings["jta jit"].median
    return {"layer": kind, "batch": batch, "hidden": hidden, "steps": steps, "inputs": inputs,
            "tf_ms": tf_s * 1e3, "jta_ms": jta_s * 1e3, "ratio": jta_s / tf_s,
            "jta_first_call_s": timings["jta jit"].first_call_s}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--hidden", type=int, default=64)
    parser.add_argument("--steps", type=int, default=100)
    parser.add_argument("--inputs", type=int, default=32)
    parser.add_argument("--repeats", type=int, default=15)
    parser.add_argument("--layers", default="lstm,gru,keras3_lstm")
    parser.add_argument("--out", help="write the results as JSON here")
    args = parser.parse_args(argv)
    rows = [measure(kind, args.batch, args.hidden, args.steps, args.inputs, args.repeats)
            for kind in args.layers.split(",")]
    print("| layer | batch, hidden, T | tf.function | jta `jax.jit` | jta / TF |")
    print("|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['layer']} | {r['batch']}, {r['hidden']}, {r['steps']} | {r['tf_ms']:.2f} ms | "
              f"{r['jta_ms']:.2f} ms | {r['ratio']:.2f} |")
    if args.out:
        with open(args.out, "w") as f:
            json.dump({"rows": rows, "machine": platform.processor() or platform.machine(),
                       "cpus": os.cpu_count(), "jax": jax.__version__}, f, indent=1)


if __name__ == "__main__":
    main()
