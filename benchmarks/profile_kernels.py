"""``python -m benchmarks.profile_kernels``: kernels per loop step, counted from a device profile.

``tests/test_kernel_counts.py`` counts the instructions of each ``while`` body in XLA's optimized
HLO; this script counts what the device actually ran. Each program (W1-W3 of
:mod:`benchmarks.workloads`, forward and ``jax.grad``, batch 16 and unbatched; ``native``
``lax.scan``, ``jta`` as ``jax.jit(jta.checkify(f))`` compiles it for ``jta.checked``,
``jta_jit`` under a bare ``jax.jit`` and ``jta_nochecks``) is compiled at two lengths ``T1 < T2``, run once to warm up, then run once under
``jax.profiler.trace``; the device events of the second profile minus those of the first, divided
by ``T2 - T1``, are the kernels per step (loops' fixed costs cancel).

On a GPU the events counted are those of the device plane's stream lines (kernels, and copies
where XLA makes them); on a CPU, where XLA's loops run on the host, the thunks on XLA's host
threads (none for a program with host callbacks, such as ``jta_jit``). The JSON keeps, per
program, the event count of every line.

    python -m benchmarks.profile_kernels --out results_kernels.json
"""

from __future__ import annotations

import argparse
import collections
import datetime
import glob
import json
import os
import tempfile
from typing import Any

import jax

import jta

from . import workloads

WORKLOADS = (("W1", False), ("W1", True), ("W2", False), ("W2", True), ("W3", False), ("W3", True))


def _program(workload: str, grad: bool, impl: str):
    fns = getattr(workloads, workload)
    wrap = workloads.grad_of if grad else (lambda f: f)
    if impl == "native":
        return jax.jit(wrap(fns["native"]))
    if impl == "jta_nochecks":
        return jax.jit(wrap(lambda W, xs: fns["jta"](W, xs, checks=False)))
    if impl == "jta_jit":
        return jax.jit(wrap(fns["jta"]))
    return jax.jit(jta.checkify(wrap(fns["jta"])))


def _events_per_line(fn, args) -> dict[str, int]:
    """``{plane/line: events}`` of one run of the compiled ``fn``."""
    jax.block_until_ready(fn(*args))
    folder = tempfile.mkdtemp()
    with jax.profiler.trace(folder):
        jax.block_until_ready(fn(*args))
    (path,) = glob.glob(os.path.join(folder, "**", "*.xplane.pb"), recursive=True)
    counts: dict[str, int] = collections.Counter()
    for plane in jax.profiler.ProfileData.from_file(path).planes:
        for line in plane.lines:
            counts[f"{plane.name}/{line.name}"] += sum(1 for _ in line.events)
    return dict(counts)


def _counted(lines: dict[str, int]) -> int:
    device = {k: v for k, v in lines.items() if k.startswith("/device:") and "Stream" in k}
    if device:
        return sum(device.values())
    # XLA:CPU runs a program's thunks on whichever of its threads is free.
    return sum(v for k, v in lines.items() if k.startswith("/host:CPU/tf_"))


def main(argv: list[str] | None = None) -> dict[str, Any]:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", default="250,500", help="T1,T2")
    ap.add_argument("--impls", default="native,jta,jta_jit,jta_nochecks")
    ap.add_argument("--out", default=None)
    opts = ap.parse_args(argv)
    t1, t2 = (int(x) for x in opts.steps.split(","))
    rows = []
    for workload, grad in WORKLOADS:
        for batch in (workloads.BATCH, workloads.UNBATCHED):
            per_impl = {}
            for impl in opts.impls.split(","):
                fn = _program(workload, grad, impl)
                lines = {T: _events_per_line(fn, workloads.make_inputs(T, batch=batch)) for T in (t1, t2)}
                per_step = (_counted(lines[t2]) - _counted(lines[t1])) / (t2 - t1)
                per_impl[impl] = per_step
                rows.append({"workload": workload, "mode": "grad" if grad else "fwd",
                             "batch": batch, "impl": impl, "kernels_per_step": per_step,
                             "lines": {str(T): v for T, v in lines.items()}})
            print(f"{workload} {'grad' if grad else 'fwd ':4} batch={batch!s:4} "
                  + "  ".join(f"{k}={v:.2f}" for k, v in per_impl.items()), flush=True)
    device = jax.devices()[0]
    result = {"meta": {"jax": jax.__version__, "device": f"{device.platform}:{device.id}",
                       "device_kind": device.device_kind, "steps": [t1, t2],
                       "date": datetime.date.today().isoformat()},
              "results": rows}
    if opts.out:
        with open(opts.out, "w") as f:
            json.dump(result, f, indent=1)
    return result


if __name__ == "__main__":
    main()
