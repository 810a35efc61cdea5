"""``python -m benchmarks``: time jta against native JAX (and TensorFlow) on RNN-style loops.

Every workload (see :mod:`benchmarks.workloads`) runs on every implementation, interleaved in
this one process (:mod:`benchmarks.timing`); the table gives ms per call and the ratio to the
native ``lax.scan`` baseline measured in the same run, followed by one PASS/FAIL line per
performance target. Results go to ``benchmarks/results/results.json`` and ``plot.png``.

    python -m benchmarks            # T in {500, 1000, 2000, 4000}; a few minutes on 2 cores
    python -m benchmarks --quick    # T in {500, 1000}, 3 repeats
    python -m benchmarks --steps 250,500 --workloads W1,W3 --no-tf
"""

from __future__ import annotations

import argparse
import math
import os
import platform
import sys
import time
from collections.abc import Callable
from typing import Any, Optional

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import jax  # noqa: E402
import numpy as np  # noqa: E402

import jta  # noqa: E402

from . import report, workloads  # noqa: E402
from .timing import time_interleaved  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))


def _builders(with_tf: bool) -> dict[tuple[str, str], Callable[[int], dict[str, Any]]]:
    return {
        ("W1", "fwd"): lambda T: workloads.build_w1(T, False, with_tf),
        ("W1", "grad"): lambda T: workloads.build_w1(T, True, with_tf),
        ("W2", "fwd"): lambda T: workloads.build_w2(T, False),
        ("W2", "grad"): lambda T: workloads.build_w2(T, True),
        ("W3", "grad"): lambda T: workloads.build_w3(T, True),
        ("W4", "k16"): workloads.build_w4,
    }


def _flat(out: Any) -> np.ndarray:
    leaves = jax.tree_util.tree_leaves(out)
    return np.concatenate([np.ravel(np.asarray(x, np.float64)) for x in leaves])


def _rel_error(out: Any, ref: Any) -> float:
    a, b = _flat(out), _flat(ref)
    if a.shape != b.shape:
        return math.inf
    return float(np.max(np.abs(a - b)) / max(np.max(np.abs(b)), 1e-30))


def _predict(history: list[tuple[int, float]], T: int) -> float:
    """Seconds per call at ``T`` extrapolated from earlier ``(T, seconds)`` (power law)."""
    if not history:
        return 0.0
    (T1, t1) = history[-1]
    if len(history) >= 2:
        T0, t0 = history[-2]
        p = math.log(max(t1, 1e-9) / max(t0, 1e-9)) / math.log(T1 / T0)
        p = min(max(p, 1.0), 2.5)
    else:
        p = 1.5
    return t1 * (T / T1) ** p


def main(argv: Optional[list[str]] = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="T in {500, 1000} and 3 repeats")
    ap.add_argument("--steps", type=lambda s: [int(x) for x in s.split(",")],
                    help="comma-separated sequence lengths T (default 500,1000,2000,4000)")
    ap.add_argument("--repeats", type=int, help="timed samples per implementation (default 7; 3 with --quick)")
    ap.add_argument("--workloads", default="W1,W2,W3,W4", help="subset of W1,W2,W3,W4 (W5 is measured within W1)")
    ap.add_argument("--no-tf", action="store_true", help="leave out the TensorFlow peers")
    ap.add_argument("--max-call-s", type=float, default=3.0,
                    help="skip an implementation at a T where its extrapolated time per call exceeds this")
    ap.add_argument("--out", default=os.path.join(HERE, "results"), help="directory for results.json and plot.png")
    args = ap.parse_args(argv)

    steps = args.steps or ([500, 1000] if args.quick else [500, 1000, 2000, 4000])
    repeats = args.repeats or (3 if args.quick else 7)
    selected = {w.strip().upper() for w in args.workloads.split(",")}
    tf = None if args.no_tf else workloads.tensorflow()
    builders = _builders(tf is not None)
    meta = {
        "jax": jax.__version__, "jaxlib": getattr(jax, "lib", None) and jax.lib.__version__,
        "jta": jta.__version__, "tensorflow": getattr(tf, "__version__", None),
        "python": platform.python_version(), "machine": platform.machine(),
        "cpu_count": os.cpu_count(), "device": str(jax.devices()[0]),
        "xla_flags": os.environ.get("XLA_FLAGS", ""), "steps": steps, "repeats": repeats,
        "batch": workloads.BATCH, "hidden": workloads.HIDDEN, "k_grads": workloads.K_GRADS,
        "argv": sys.argv[1:] if argv is None else argv,
    }
    print(f"jta benchmarks: jax {jax.__version__} on {meta['device']} ({os.cpu_count()} CPUs), "
          f"TensorFlow {meta['tensorflow'] or 'not used'}; batch {workloads.BATCH}, hidden {workloads.HIDDEN}; "
          f"T in {steps}, {repeats} repeats", flush=True)

    results: list[report.Result] = []
    history: dict[tuple[str, str, str], list[tuple[int, float]]] = {}
    start = time.perf_counter()
    for T in steps:
        for key, build in builders.items():
            if key[0] not in selected:
                continue
            base = report.SERIES[key][1]
            cases = build(T)
            for impl in list(cases):
                guess = _predict(history.get((*key, impl), []), T)
                if impl != base and guess > args.max_call_s:
                    results.append(report.Result(key[0], key[1], T, impl, math.nan, [], 0, math.nan, math.nan,
                                                 skipped=f"extrapolated {guess:.1f} s per call > --max-call-s"))
                    del cases[impl]
            # TensorFlow's thread pools keep spinning for a while after each call and would slow
            # down whichever JAX call came next: the TF peers form their own interleaved group,
            # timed after the JAX group, then the machine gets a moment to settle.
            tf_cases = {k: v for k, v in cases.items() if k.startswith("tf")}
            timings = time_interleaved({k: v for k, v in cases.items() if k not in tf_cases}, repeats)
            if tf_cases:
                timings.update(time_interleaved(tf_cases, repeats))
                time.sleep(1.0)
            ref = timings[base]
            for impl, t in timings.items():
                err = None if impl == base else _rel_error(t.output, ref.output)
                results.append(report.Result(
                    key[0], key[1], T, impl, t.median * 1e3, [s * 1e3 for s in t.samples], t.inner,
                    t.first_call_s * 1e3, t.median / ref.median, max_rel_error=err))
                history.setdefault((*key, impl), []).append((T, t.median))
            for t in timings.values():
                t.output = None
            print(f"[{time.perf_counter() - start:6.1f}s] T={T:<5} {key[0]} {key[1]:<4}  "
                  + "  ".join(f"{impl} {t.median * 1e3:.2f}" for impl, t in timings.items()), flush=True)

    targets = report.evaluate_targets(results)
    meta["elapsed_s"] = round(time.perf_counter() - start, 1)
    print(report.format_table(results))
    print()
    print(report.format_targets(targets))
    json_path = os.path.join(args.out, "results.json")
    report.write_json(json_path, results, targets, meta)
    problem = report.write_plot(os.path.join(args.out, "plot.png"), results)
    print(f"\nwrote {json_path}" + (f"; {problem}" if problem else f" and {os.path.join(args.out, 'plot.png')}")
          + f"  (total {meta['elapsed_s']} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
