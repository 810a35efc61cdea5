"""Interleaved wall-clock timing of compiled callables.

All implementations of one workload at one ``T`` are timed *together*: after warm-up (compile
plus one run, excluded), every repeat round calls each implementation once, in a rotated order,
so slow drifts of the machine (other processes, frequency scaling) hit all of them alike. A
sample is the mean of ``inner`` back-to-back calls (chosen so a sample lasts at least
``min_sample_s``), each call ending in ``jax.block_until_ready``; the reported time is the
median sample. Compile times (:func:`time_compile`) are taken the same interleaved way, from
cleared JAX caches.
"""

from __future__ import annotations

import dataclasses
import gc
import math
import statistics
import time
from collections.abc import Callable
from typing import Any

import jax


@dataclasses.dataclass
class Timing:
    """Per-call times of one implementation, in seconds."""

    samples: list[float]
    inner: int  # calls averaged into one sample
    first_call_s: float  # compile + first run (excluded from the samples)
    output: Any = None  # the first call's output (for the correctness check), if kept

    @property
    def median(self) -> float:
        return statistics.median(self.samples) if self.samples else math.nan


def _block(out: Any) -> None:
    jax.block_until_ready(out)  # a no-op on NumPy outputs (TensorFlow peers return NumPy)


def _call(fn: Callable[..., Any], args: tuple[Any, ...], n: int) -> float:
    start = time.perf_counter()
    for _ in range(n):
        _block(fn(*args))
    return (time.perf_counter() - start) / n


def time_interleaved(cases: dict[str, tuple[Callable[..., Any], tuple[Any, ...]]], repeats: int,
                     min_sample_s: float = 0.02, max_inner: int = 1000, slow_call_s: float = 1.0,
                     slow_repeats: int = 3, keep_output: bool = True) -> dict[str, Timing]:
    """Time every case of ``cases`` (``name -> (fn, args)``), interleaved.

    Cases slower than ``slow_call_s`` per call get only ``slow_repeats`` samples (the naive
    buffer's quadratic gradients would otherwise dominate the run time). ``max_inner`` bounds the
    calls per sample: the unbatched workloads run in well under a millisecond per call.
    """
    timings: dict[str, Timing] = {}
    plan: dict[str, tuple[int, int]] = {}  # name -> (inner, repeats)
    for name, (fn, args) in cases.items():
        start = time.perf_counter()
        out = fn(*args)  # compile + first run
        _block(out)
        first = time.perf_counter() - start
        estimate = _call(fn, args, 1)  # one more warm-up call, also our cost estimate
        inner = max(1, min(max_inner, math.ceil(min_sample_s / max(estimate, 1e-9))))
        plan[name] = (inner, repeats if estimate < slow_call_s else min(repeats, slow_repeats))
        timings[name] = Timing([], inner, first, out if keep_output else None)
    names = list(cases)
    for r in range(max(reps for _, reps in plan.values())):
        shift = r % len(names)
        for name in names[shift:] + names[:shift]:
            inner, reps = plan[name]
            if r < reps:
                fn, args = cases[name]
                timings[name].samples.append(_call(fn, args, inner))
    return timings


def time_compile(cases: dict[str, tuple[Callable[[], Any], tuple[Any, ...]]], repeats: int) -> dict[str, Timing]:
    """Seconds to ``make().lower(*args).compile()`` for every case (``name -> (make, args)``).

    ``make()`` returns a fresh ``jax.jit`` object; before every sample ``jax.clear_caches()``
    empties JAX's tracing, lowering and compilation caches (and a garbage collection runs), so
    every sample traces, lowers and compiles from scratch. Rounds are interleaved and rotated as
    in :func:`time_interleaved`; nothing is excluded as warm-up except one untimed round that
    imports and initialises whatever the first compilation needs.
    """
    for make, args in cases.values():  # warm-up round (lazy imports, backend initialisation)
        jax.clear_caches()
        make().lower(*args).compile()
    timings = {name: Timing([], 1, math.nan) for name in cases}
    names = list(cases)
    for r in range(repeats):
        shift = r % len(names)
        for name in names[shift:] + names[:shift]:
            make, args = cases[name]
            jax.clear_caches()
            gc.collect()
            start = time.perf_counter()
            make().lower(*args).compile()
            timings[name].samples.append(time.perf_counter() - start)
    jax.clear_caches()
    return timings
