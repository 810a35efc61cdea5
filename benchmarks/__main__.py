"""``python -m benchmarks``: time jta against native JAX (and TensorFlow) on RNN-style loops.

Every workload (see :mod:`benchmarks.workloads`) runs on every implementation, interleaved in
this one process (:mod:`benchmarks.timing`); the table gives ms per call and the ratio to the
native ``lax.scan`` baseline measured in the same run, followed by one PASS/FAIL line per
performance target. Results go to ``benchmarks/results/results.json`` and ``plot.png``.

W1u, W2u, W3u are W1-W3 without a batch axis (``h`` of shape ``(64,)``); ``compile`` times
``jax.jit(jax.value_and_grad(...)).lower(...).compile()`` of a ``--compile-steps``-step RNN (jta
vs native, JAX's caches cleared before each sample), once per run whatever ``--steps`` says.

    python -m benchmarks            # T in {500, 1000, 2000, 4000}; a few minutes on 2 cores
    python -m benchmarks --quick    # T in {500, 1000}, 3 repeats
    python -m benchmarks --steps 250,500 --workloads W1,W3 --no-tf
    python -m benchmarks --steps 1000,4000 --workloads W1,W2,W3,W1u,W2u,W3u,compile --no-tf
"""

from __future__ import annotations

import argparse
import math
import os
import platform
import subprocess
import sys
import time
from collections.abc import Callable
from typing import Any, Optional

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import jax  # noqa: E402
import numpy as np  # noqa: E402

import jta  # noqa: E402

from . import report, workloads  # noqa: E402
from .timing import time_compile, time_interleaved  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))


def _builders(with_tf: bool) -> dict[tuple[str, str], Callable[[int], dict[str, Any]]]:
    return {
        ("W1", "fwd"): lambda T: workloads.build_w1(T, False, with_tf),
        ("W1", "grad"): lambda T: workloads.build_w1(T, True, with_tf),
        ("W2", "fwd"): lambda T: workloads.build_w2(T, False),
        ("W2", "grad"): lambda T: workloads.build_w2(T, True),
        ("W3", "grad"): lambda T: workloads.build_w3(T, True),
        ("W4", "k16"): workloads.build_w4,
        ("W1u", "fwd"): lambda T: workloads.build_w1(T, False, False, batch=workloads.UNBATCHED),
        ("W1u", "grad"): lambda T: workloads.build_w1(T, True, False, batch=workloads.UNBATCHED),
        ("W2u", "fwd"): lambda T: workloads.build_w2(T, False, batch=workloads.UNBATCHED),
        ("W2u", "grad"): lambda T: workloads.build_w2(T, True, batch=workloads.UNBATCHED),
        ("W3u", "grad"): lambda T: workloads.build_w3(T, True, batch=workloads.UNBATCHED),
    }


def _jta_source() -> dict[str, Any]:
    """The measured jta: its directory, git commit, and its files that differ from that commit."""
    root = os.path.dirname(os.path.dirname(os.path.abspath(jta.__file__)))
    info: dict[str, Any] = {"jta_path": os.path.dirname(os.path.abspath(jta.__file__))}
    try:
        git = ["git", "-C", root]
        info["jta_commit"] = subprocess.run([*git, "rev-parse", "HEAD"], capture_output=True, text=True,
                                            check=True).stdout.strip()
        status = subprocess.run([*git, "status", "--porcelain", "--", "jta"], capture_output=True, text=True,
                                check=True).stdout
        info["jta_modified"] = [line[3:] for line in status.splitlines()]
    except (OSError, subprocess.CalledProcessError):
        info["jta_commit"] = None
    return info


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


class Progress:
    """How much of the run is done, and an estimate of the time left: a group's time grows with
    its number of steps ``T``, so the estimate is the seconds per step so far times the steps left."""

    def __init__(self, total_steps: int):
        self.total, self.steps, self.seconds = total_steps, 0, 0.0

    def done(self, steps: int, seconds: float) -> None:
        self.steps += steps
        self.seconds += seconds

    def __str__(self) -> str:
        left = (self.total - self.steps) * self.seconds / max(self.steps, 1)
        return f"{100 * self.steps / max(self.total, 1):3.0f}% done, ~{left:.0f}s left"


def main(argv: Optional[list[str]] = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="T in {500, 1000} and 3 repeats")
    ap.add_argument("--steps", type=lambda s: [int(x) for x in s.split(",")],
                    help="comma-separated sequence lengths T (default 500,1000,2000,4000)")
    ap.add_argument("--repeats", type=int, help="timed samples per implementation (default 7; 3 with --quick)")
    ap.add_argument("--workloads", default="W1,W2,W3,W4,W1u,W2u,W3u,compile",
                    help="subset of W1,W2,W3,W4,W1u,W2u,W3u,compile (W5 is measured within W1)")
    ap.add_argument("--compile-steps", type=int, default=1000, help="T of the compile-time RNN (default 1000)")
    ap.add_argument("--compile-repeats", type=int, default=5, help="compile-time samples per implementation")
    ap.add_argument("--no-tf", action="store_true", help="leave out the TensorFlow peers")
    ap.add_argument("--skip", default="", help="comma-separated implementations to leave out (e.g. jta,raw)")
    ap.add_argument("--max-call-s", type=float, default=3.0,
                    help="skip an implementation at a T where its extrapolated time per call exceeds this")
    ap.add_argument("--out", default=os.path.join(HERE, "results"), help="directory for results.json and plot.png")
    args = ap.parse_args(argv)

    steps = args.steps or ([500, 1000] if args.quick else [500, 1000, 2000, 4000])
    repeats = args.repeats or (3 if args.quick else 7)
    selected = {w.strip().upper() for w in args.workloads.split(",")}
    unknown = selected - {k[0].upper() for k in _builders(False)} - {report.COMPILE.upper()}
    if unknown:
        ap.error(f"unknown workloads: {', '.join(sorted(unknown))}")
    tf = None if args.no_tf else workloads.tensorflow()
    builders = _builders(tf is not None)
    meta = {
        "jax": jax.__version__, "jaxlib": getattr(jax, "lib", None) and jax.lib.__version__,
        "jta": jta.__version__, "tensorflow": getattr(tf, "__version__", None),
        "python": platform.python_version(), "machine": platform.machine(),
        "cpu_count": os.cpu_count(), "device": str(jax.devices()[0]),
        "xla_flags": os.environ.get("XLA_FLAGS", ""), "steps": steps, "repeats": repeats,
        "batch": workloads.BATCH, "hidden": workloads.HIDDEN, "k_grads": workloads.K_GRADS,
        "unbatched": [w for w in ("W1u", "W2u", "W3u") if w.upper() in selected],
        "compile_steps": args.compile_steps if report.COMPILE.upper() in selected else None,
        "compile_repeats": args.compile_repeats,
        "argv": sys.argv[1:] if argv is None else argv, **_jta_source(),
    }
    print(f"jta benchmarks: jax {jax.__version__} on {meta['device']} ({os.cpu_count()} CPUs), "
          f"TensorFlow {meta['tensorflow'] or 'not used'}; batch {workloads.BATCH}, hidden {workloads.HIDDEN}; "
          f"T in {steps}, {repeats} repeats", flush=True)

    skip = set(filter(None, args.skip.split(",")))
    results: list[report.Result] = []
    history: dict[tuple[str, str, str], list[tuple[int, float]]] = {}
    start = time.perf_counter()
    if report.COMPILE.upper() in selected:
        T = args.compile_steps
        timings = time_compile({k: v for k, v in workloads.compile_cases(T).items() if k not in skip},
                               args.compile_repeats)
        ref = timings["native"]
        for impl, t in timings.items():
            results.append(report.Result(report.COMPILE, "vg", T, impl, t.median * 1e3, [s * 1e3 for s in t.samples],
                                         t.inner, math.nan, t.median / ref.median))
        print(f"[{time.perf_counter() - start:6.1f}s] T={T:<5} compile  "
              + "  ".join(f"{impl} {t.median * 1e3:.0f}" for impl, t in timings.items()), flush=True)
    groups = [(T, key) for T in steps for key in builders if key[0].upper() in selected]
    progress = Progress(sum(T for T, _ in groups))
    for T in steps:
        for key, build in builders.items():
            if key[0].upper() not in selected:
                continue
            group_start = time.perf_counter()
            base = report.SERIES[key][1]
            cases = {k: v for k, v in build(T).items() if k not in skip}
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
            progress.done(T, time.perf_counter() - group_start)
            print(f"[{time.perf_counter() - start:6.1f}s, {progress}] T={T:<5} {key[0]} {key[1]:<4}  "
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
