"""``python -m benchmarks.compile_split``: where the compile time of a gradient goes.

For ``jax.value_and_grad`` of W1, W2 and W3 (``benchmarks.workloads``, T = 1000, batch 16 by
default, loss ``mean(out ** 2)``, gradient with respect to ``W``), every implementation is traced,
lowered and compiled from cleared caches (``jax.clear_caches()`` before each sample), its phases
timed one by one:

* ``trace``: ``jax.jit(f).trace(*args)`` (for ``jta.checkify``: tracing the user's function to a
  jaxpr, JAX's differentiation included);
* ``functionalize``: ``jta.checkify``'s interpreter threading the record through that jaxpr
  (hoisting included): the top-level ``functionalize.eval_jaxpr`` call, timed inside the trace;
  ``trace`` is then the rest of the trace;
* ``lower``: ``.lower()`` (StableHLO);
* ``xla``: ``.compile()`` (XLA's passes and code generation).

Implementations: ``native`` (plain ``lax.scan``), ``nochecks`` (``checks=False`` under
``jax.jit``), ``checkify`` (``jax.jit(jta.checkify(f))``, the program ``jta.checked`` compiles)
and ``checked`` (``jta.checked(jax.jit(f))``: its first call minus a warm call, end to end,
Python wrapper and the first run's record check included; no split). Samples are interleaved
and rotated; medians are reported, with the ratio of each total to native's.

``--compare`` adds ``nochecks_jaxrule`` and ``checkify_jaxrule``: the same programs differentiated
by JAX's own rules for ``scan`` (section 4 of ``jta._delivery.jax_rules``, the rewrite of
``jta._delivery.scan_rewrite``, switched off), interleaved with the others: a before/after
comparison in one process. ``--without-rewrite`` switches the rewrite off for every case.

    python -m benchmarks.compile_split                    # W1,W2,W3, T=1000, 3 samples
    python -m benchmarks.compile_split --steps 1000 --repeats 5 --json out.json
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import gc
import json
import statistics
import time
from collections.abc import Callable, Iterator
from typing import Any

import jax
import jax.numpy as jnp

import jta
from jta._delivery import functionalize, jax_rules

from . import workloads

PHASES = ("trace", "functionalize", "lower", "xla")


class _Clock:
    """Time spent in the outermost ``functionalize.eval_jaxpr`` call while installed."""

    def __init__(self) -> None:
        self.seconds = 0.0
        self._depth = 0
        self._original = functionalize.eval_jaxpr

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        self._depth += 1
        start = time.perf_counter()
        try:
            return self._original(*args, **kwargs)
        finally:
            self._depth -= 1
            if self._depth == 0:
                self.seconds += time.perf_counter() - start

    @contextlib.contextmanager
    def installed(self) -> Iterator[_Clock]:
        functionalize.eval_jaxpr = self  # (rules call it through the module: nested calls are counted once)
        try:
            yield self
        finally:
            functionalize.eval_jaxpr = self._original


def _value_and_grad(f: Callable[..., Any]) -> Callable[..., Any]:
    return jax.value_and_grad(lambda W, xs: jnp.mean(f(W, xs) ** 2))


def cases(workload: str, compare: bool = False) -> dict[str, Callable[[], Any]]:
    """``{impl: make}``: ``make()`` returns a fresh function to compile (``jax.jit`` or ``jta.checked``);
    with ``compare``, also ``nochecks`` and ``checkify`` differentiated by JAX's own scan rules
    (``*_jaxrule``)."""
    impls = getattr(workloads, workload)
    nochecks = functools.partial(impls["jta"], checks=False)
    made = {
        "native": lambda: jax.jit(_value_and_grad(impls["native"])),
        "nochecks": lambda: jax.jit(_value_and_grad(nochecks)),
        "checkify": lambda: jax.jit(jta.checkify(_value_and_grad(impls["jta"]))),
        "checked": lambda: jta.checked(jax.jit(_value_and_grad(impls["jta"]))),
    }
    if compare:
        made["nochecks_jaxrule"] = made["nochecks"]
        made["checkify_jaxrule"] = made["checkify"]
    return made


def _sample(name: str, make: Callable[[], Any], args: tuple[Any, ...]) -> dict[str, float]:
    with jax_rules.jax_scan_rules() if name.endswith("_jaxrule") else contextlib.nullcontext():
        return (_first_call if name == "checked" else _split)(make, args)


def _split(make: Callable[[], Any], args: tuple[Any, ...]) -> dict[str, float]:
    jax.clear_caches()
    gc.collect()
    fn = make()
    clock = _Clock()
    with clock.installed():
        start = time.perf_counter()
        traced = fn.trace(*args)
        traced_s = time.perf_counter() - start
    start = time.perf_counter()
    lowered = traced.lower()
    lower_s = time.perf_counter() - start
    start = time.perf_counter()
    lowered.compile()
    xla_s = time.perf_counter() - start
    return {"trace": traced_s - clock.seconds, "functionalize": clock.seconds, "lower": lower_s, "xla": xla_s}


def _first_call(make: Callable[[], Any], args: tuple[Any, ...]) -> dict[str, float]:
    jax.clear_caches()
    gc.collect()
    fn = make()
    start = time.perf_counter()
    jax.block_until_ready(fn(*args))
    first = time.perf_counter() - start
    start = time.perf_counter()
    jax.block_until_ready(fn(*args))
    return {"total": first - (time.perf_counter() - start)}


def measure(workload: str, T: int, batch: Any, repeats: int, compare: bool = False) -> dict[str, dict[str, float]]:
    """``{impl: {phase: median seconds, "total": ...}}``."""
    args = workloads.make_inputs(T, batch=batch)
    makes = cases(workload, compare)
    samples: dict[str, list[dict[str, float]]] = {name: [] for name in makes}
    names = list(makes)
    for name in names:  # warm-up round: imports, backend initialisation
        _sample(name, makes[name], args)
    for r in range(repeats):
        shift = r % len(names)
        for name in names[shift:] + names[:shift]:
            samples[name].append(_sample(name, makes[name], args))
    jax.clear_caches()
    out = {}
    for name, runs in samples.items():
        keys = runs[0].keys()
        med = {k: statistics.median(run[k] for run in runs) for k in keys}
        med["total"] = statistics.median(sum(run.values()) for run in runs) if "total" not in med else med["total"]
        out[name] = med
    return out


def main(argv: Any = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--workloads", default="W1,W2,W3")
    ap.add_argument("--steps", type=int, default=1000)
    ap.add_argument("--unbatched", action="store_true", help="no batch axis (W1u-W3u)")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--without-rewrite", action="store_true",
                    help="JAX's own scan differentiation rules (jta's rewrite off), for comparison")
    ap.add_argument("--compare", action="store_true",
                    help="also nochecks and checkify under JAX's own scan rules (*_jaxrule), interleaved")
    ap.add_argument("--json", help="write the medians here")
    args = ap.parse_args(argv)
    batch = workloads.UNBATCHED if args.unbatched else workloads.BATCH
    results: dict[str, Any] = {"T": args.steps, "batch": batch, "repeats": args.repeats,
                               "rewrite": not args.without_rewrite, "jax": jax.__version__, "workloads": {}}
    print(f"T={args.steps} batch={batch} repeats={args.repeats} rewrite={'off' if args.without_rewrite else 'on'}"
          " (median ms; ratio: total / native total)")
    print(f"{'':4}{'impl':18}" + "".join(f"{p:>15}" for p in PHASES) + f"{'total':>10}{'ratio':>8}")
    with jax_rules.jax_scan_rules() if args.without_rewrite else contextlib.nullcontext():
        for workload in args.workloads.split(","):
            res = measure(workload, args.steps, batch, args.repeats, args.compare)
            results["workloads"][workload] = res
            native = res["native"]["total"]
            for name, med in res.items():
                cols = "".join(f"{1e3 * med[p]:>15.1f}" if p in med else f"{'':>15}" for p in PHASES)
                print(f"{workload:4}{name:18}{cols}{1e3 * med['total']:>10.1f}{med['total'] / native:>8.2f}", flush=True)
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(results, fh, indent=1)


if __name__ == "__main__":
    main()
