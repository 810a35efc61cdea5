"""``python -m benchmarks.loops``: ``jax.grad`` through ``jta.while_loop`` against its peers.

The workload is a 64-wide tanh RNN, ``h = tanh(h @ W + xs[i])``, run by a loop whose condition
stops it after ``T`` steps (``i < n`` with ``n`` a run-time value), differentiated in ``W`` of
``sum(h_T ** 2)``; unbatched (``h`` of shape ``(64,)``) and with a batch of 16. Implementations,
timed interleaved in one process (:mod:`benchmarks.timing`), ms per call:

* ``scan`` - ``jax.grad`` of ``lax.scan`` over exactly the ``T`` steps (the baseline: what a
  JAX user writes when the trip count is known);
* ``jta`` - ``jax.jit(jax.grad(...))`` of ``jta.while_loop(..., maximum_iterations=T)``;
* ``jta_bound20000`` - the same loop with ``maximum_iterations=20000`` (stacks of 20000 rows);
* ``jta_checked`` - ``jta.checked(jax.grad(...))`` of the loop with no bound (stacks sized
  from what ``jta.checked`` learned; its retraces are counted);
* ``equinox`` - ``equinox.internal.while_loop(kind="checkpointed", max_steps=T)``;
* ``tf`` - ``tf.GradientTape`` of ``tf.while_loop`` inside ``tf.function`` (T = 1000 only).

Also reported: the temporary memory XLA allocates for each compiled gradient
(``memory_analysis().temp_size_in_bytes``). Results go to ``benchmarks/results_loops_<platform>.json``
and a Markdown table to ``docs/_generated/loops_<platform>.md`` (included by ``docs/loops.md``).

    pip install -e ".[test,bench]"          # TensorFlow and equinox, the peers
    python -m benchmarks.loops              # T in {1000, 4000}
    python -m benchmarks.loops --quick      # T = 1000, fewer repeats
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
from collections.abc import Callable
from typing import Any, Optional

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
from jax import lax  # noqa: E402

import jta  # noqa: E402

from .timing import time_interleaved  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
HIDDEN, BATCH = 64, 16


def _data(T: int, batch: Optional[int]) -> tuple[jax.Array, jax.Array, jax.Array]:
    rng = np.random.default_rng(0)
    W = jnp.asarray(rng.standard_normal((HIDDEN, HIDDEN)) / np.sqrt(HIDDEN), jnp.float32)
    shape = (T, HIDDEN) if batch is None else (T, batch, HIDDEN)
    return W, jnp.asarray(rng.standard_normal(shape), jnp.float32), jnp.zeros(shape[1:], jnp.float32)


def _scan_loss(h0: jax.Array) -> Callable[..., Any]:
    def loss(W: jax.Array, xs: jax.Array, n: Any) -> jax.Array:
        h, _ = lax.scan(lambda h, x: (jnp.tanh(h @ W + x), None), h0, xs)
        return jnp.sum(h ** 2)
    return loss


def _while_loss(h0: jax.Array, bound: Optional[int], loop: Callable[..., Any] = jta.while_loop) -> Callable[..., Any]:
    def loss(W: jax.Array, xs: jax.Array, n: Any) -> jax.Array:
        def body(carry: tuple[Any, Any]) -> tuple[Any, Any]:
            i, h = carry
            return i + 1, jnp.tanh(h @ W + xs[i])
        _, h = loop(lambda c: c[0] < n, body, (0, h0), maximum_iterations=bound)
        return jnp.sum(h ** 2)
    return loss


def _equinox_loop(cond: Any, body: Any, init: Any, maximum_iterations: int) -> Any:
    import equinox.internal as eqxi

    return eqxi.while_loop(cond, body, init, max_steps=maximum_iterations, kind="checkpointed")


def _tf_grad(T: int, batch: Optional[int]) -> Callable[..., Any]:
    import tensorflow as tf

    @tf.function
    def grad(W: Any, xs: Any, n: Any) -> Any:
        with tf.GradientTape() as tape:
            tape.watch(W)
            h0 = tf.zeros(xs.shape[1:])
            def body(i: Any, h: Any) -> Any:
                hw = tf.linalg.matvec(W, h, transpose_a=True) if batch is None else h @ W
                return i + 1, tf.tanh(hw + xs[i])

            _, h = tf.while_loop(lambda i, h: i < n, body, (tf.constant(0), h0))
            loss = tf.reduce_sum(h ** 2)
        return tape.gradient(loss, W)
    return grad


def build(T: int, batch: Optional[int], with_tf: bool) -> tuple[dict[str, tuple[Any, tuple[Any, ...]]], dict[str, Any]]:
    """``({name: (fn, args)}, {name: compiled or None})`` for one ``T`` and batch."""
    W, xs, h0 = _data(T, batch)
    n = jnp.asarray(T, jnp.int32)
    jitted = {
        "scan": jax.jit(jax.grad(_scan_loss(h0))),
        "jta": jax.jit(jax.grad(_while_loss(h0, T))),
        "jta_bound20000": jax.jit(jax.grad(_while_loss(h0, 20000))),
        "equinox": jax.jit(jax.grad(_while_loss(h0, T, _equinox_loop))),
    }
    cases: dict[str, tuple[Any, tuple[Any, ...]]] = {k: (f, (W, xs, n)) for k, f in jitted.items()}
    cases["jta_checked"] = (jta.checked(jax.grad(_while_loss(h0, None))), (W, xs, n))
    if with_tf and T <= 1000:
        import tensorflow as tf

        cases["tf"] = (_tf_grad(T, batch), (tf.constant(np.asarray(W)), tf.constant(np.asarray(xs)), tf.constant(T)))
    return cases, {k: f.lower(W, xs, n).compile() for k, f in jitted.items()}


def _trace_count(T: int, batch: Optional[int]) -> int:
    """How many times ``jta.checked`` traces the unbounded gradient before it has room for T steps."""
    W, xs, h0 = _data(T, batch)
    traces = []
    inner = _while_loss(h0, None)

    def counted(*args: Any) -> Any:
        traces.append(1)
        return inner(*args)

    jta.checked(jax.grad(counted))(W, xs, jnp.asarray(T, jnp.int32))
    return len(traces)


def main(argv: Optional[list[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--no-tf", action="store_true")
    parser.add_argument("--out", default=None, help="JSON path (default benchmarks/results_loops_<platform>.json, "
                                                    "and then the docs table too)")
    args = parser.parse_args(argv)
    device = jax.devices()[0]
    platform = "gpu_" + device.device_kind.split()[-1].lower() if device.platform == "gpu" else device.platform
    steps = (1000,) if args.quick else (1000, 4000)
    rows = []
    for batch in (None, BATCH):
        for T in steps:
            cases, compiled = build(T, batch, not args.no_tf)
            timings = time_interleaved(cases, repeats=5 if args.quick else 15, keep_output=True)
            ref = np.asarray(timings["scan"].output)
            base = timings["scan"].median
            for name, t in timings.items():
                err = float(np.max(np.abs(np.asarray(t.output) - ref)) / max(1e-30, float(np.max(np.abs(ref)))))
                mem = compiled[name].memory_analysis() if name in compiled else None
                rows.append({"batch": batch, "T": T, "impl": name, "ms": t.median * 1e3, "ratio": t.median / base,
                             "rel_error": err, "temp_bytes": getattr(mem, "temp_size_in_bytes", None)})
                print(f"batch={batch} T={T} {name:15s} {t.median * 1e3:9.3f} ms  x{t.median / base:5.2f}  "
                      f"err {err:.1e}", flush=True)
    retraces = {str(T): _trace_count(T, None) for T in (100, 1000, 4000)}
    print("jta.checked traces before room for T steps:", retraces)
    result = {"date": datetime.date.today().isoformat(), "device": f"{device.platform}: {device.device_kind}",
              "jax": jax.__version__, "rows": rows, "checked_traces": retraces}
    out = args.out or os.path.join(HERE, f"results_loops_{platform}.json")
    with open(out, "w") as f:
        json.dump(result, f, indent=1)
    if args.out is None:  # the published results: the docs table follows them
        with open(os.path.join(ROOT, "docs", "_generated", f"loops_{platform}.md"), "w") as f:
            f.write(table(result))
    return 0


def table(result: dict[str, Any]) -> str:
    """The Markdown table of a result: ms per gradient and ratio to ``lax.scan``, per case."""
    impls = ["scan", "jta", "jta_bound20000", "jta_checked", "equinox", "tf"]
    present = [i for i in impls if any(r["impl"] == i for r in result["rows"])]
    lines = [f"{result['device']}, jax {result['jax']}, {result['date']}: ms per `jax.grad` call (ratio to `scan`)",
             "", "| batch | T | " + " | ".join(present) + " |", "|---|---|" + "---|" * len(present)]
    keys = sorted({(r["batch"] or 0, r["T"]) for r in result["rows"]})
    for batch, T in keys:
        cells = []
        for impl in present:
            r = next((r for r in result["rows"] if (r["batch"] or 0, r["T"], r["impl"]) == (batch, T, impl)), None)
            cells.append("" if r is None else f"{r['ms']:.2f} ({r['ratio']:.2f}x)")
        lines.append(f"| {batch or 'none'} | {T} | " + " | ".join(cells) + " |")
    lines += ["", "Temporary memory of the compiled gradient (MiB): " + "; ".join(
        f"{r['impl']} b={r['batch'] or 'none'} T={r['T']}: {r['temp_bytes'] / 2**20:.1f}"
        for r in result["rows"] if r["temp_bytes"] is not None and r["impl"] in ("scan", "jta", "jta_bound20000")),
        "", f"`jta.checked` traces before its stacks have room (T: traces): {result['checked_traces']}", ""]
    return "\n".join(lines)


if __name__ == "__main__":
    raise SystemExit(main())
