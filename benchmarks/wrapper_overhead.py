"""``python -m benchmarks.wrapper_overhead``: what ``jta.checked`` adds per call.

``jta.checked(f)`` is ``jax.jit(jta.checkify(f))`` followed by ``errors.throw()``; the target is
at most 10 µs per call over the compiled program's own run (``jax.jit(jta.checkify(f))`` and
waiting for its outputs), whatever the number of argument leaves. The three are timed
interleaved in this process (median of ``--repeats`` rounds of ``--calls`` calls each), for an
argument of 1, 100 and 1000 leaves; the results go to ``benchmarks/results/wrapper_overhead.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp

import jta

TARGET_US = 10.0


def program(leaves: list[jax.Array], i: jax.Array) -> jax.Array:
    ta = jta.TensorArray(jnp.float32, size=3, element_shape=()).unstack(jnp.arange(3.0))
    return ta.read(i) + sum(leaf[0] for leaf in leaves[:4])


def per_call_us(run: Callable[[], Any], calls: int) -> float:
    start = time.perf_counter()
    for _ in range(calls):
        run()
    return (time.perf_counter() - start) / calls * 1e6


def measure(n_leaves: int, calls: int, repeats: int) -> dict[str, float]:
    leaves = [jnp.ones((2,)) for _ in range(n_leaves)]
    index = jnp.int32(1)
    checked = jta.checked(program)
    checkified = jax.jit(jta.checkify(program))

    def pair() -> Any:
        errors, out = checkified(leaves, index)
        errors.throw()
        return out

    def wrapper() -> Any:
        return checked(leaves, index)

    def run_only() -> Any:
        return jax.block_until_ready(checkified(leaves, index))

    jax.block_until_ready((pair(), wrapper()))  # compile both
    rounds: dict[str, list[float]] = {"run": [], "jit_checkify_throw": [], "checked": []}
    for _ in range(repeats):  # interleaved, so that all see the same machine
        rounds["run"].append(per_call_us(run_only, calls))
        rounds["jit_checkify_throw"].append(per_call_us(pair, calls))
        rounds["checked"].append(per_call_us(wrapper, calls))
    medians = {k: statistics.median(v) for k, v in rounds.items()}
    return {"leaves": n_leaves, **medians, "overhead_us": medians["checked"] - medians["run"]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=300)
    parser.add_argument("--repeats", type=int, default=15)
    args = parser.parse_args()
    rows = []
    for n in (1, 100, 1000):
        print(f"  {n} leaves ...", flush=True)
        rows.append(measure(n, args.calls, args.repeats))
    print(f"{'leaves':>7} {'run µs':>8} {'jit(checkify)+throw µs':>24} {'checked µs':>12} {'overhead µs':>12}")
    for r in rows:
        print(f"{r['leaves']:>7} {r['run']:>8.1f} {r['jit_checkify_throw']:>24.1f} {r['checked']:>12.1f} "
              f"{r['overhead_us']:>12.1f}")
    worst = max(r["overhead_us"] for r in rows)
    print(f"{'PASS' if worst <= TARGET_US else 'FAIL'}: jta.checked adds at most {worst:.1f} µs per call "
          f"(target {TARGET_US:.0f} µs)")
    out = os.path.join(os.path.dirname(os.path.abspath(__file__)), "results")
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, "wrapper_overhead.json"), "w") as f:
        json.dump({"device": jax.devices()[0].device_kind, "jax": jax.__version__, "rows": rows,
                   "target_us": TARGET_US}, f, indent=2)


if __name__ == "__main__":
    main()
