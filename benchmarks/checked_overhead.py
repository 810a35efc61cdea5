"""``python -m benchmarks.checked_overhead``: what ``jta.checked`` costs per call, split into its parts.

The program is W1u (a 64-wide tanh RNN writing ``h`` to a TensorArray every step, unbatched) at
``T`` steps, in two forms:

* ``staged``: the write index is ``offset + t``, ``offset`` an argument, so the indices are not
  known while tracing: the error decision after the loop is staged into the program and its
  record comes back to the host on every call;
* ``known``: the index is the step ``t``, and ``jta.checked`` wraps a ``jax.jit`` (as the
  benchmarks and the README do): the decision is made while tracing, nothing is staged.

Against a native ``jax.jit`` of the same loop (``lax.scan`` stacking ``h``), the staged path's
per-call cost is split into:

* ``program``: ``jax.jit(f, checks=False)`` vs native: the TensorArray itself;
* ``decision``: ``jax.jit(jta.checkify(f))``, its record and output waited for, vs
  ``checks=False``: the staged decision's kernels and the record as an extra output;
* ``transfer``: the same plus the record's trip to the host, as ``jta.checked`` makes it (it
  waits for the record, then converts it: ``np.asarray`` of a record still being computed costs
  about 2 µs more on XLA:CPU);
* ``python``: ``jta.checked(f)`` vs that: jta's Python work per call.

Times are per call, the 10th percentile (``--median``: the median) of ``--rounds`` interleaved,
rotated rounds of ``--calls`` calls in this one process: the machine may be shared, and a low
percentile is what other processes disturb least. ``--per-call`` times each call on its own
instead (``--rounds`` calls of each, the variants interleaved call by call): on XLA:CPU a call's
time is bimodal (the runtime's worker thread awake, or woken: about 30 µs more on a shared 2-core
machine), and the low percentile of single calls is the awake mode. The deterministic counts do
not depend on the load: kernels of the optimized HLO's entry computation (outside the loop: each
runs once per call), outputs of the program ``jta.checked`` compiles, and, from cProfile, Python
function calls and host transfers (``numpy.asarray`` of a jax array) per call of ``jta.checked``.

``--against REV`` also times ``jta.checked`` as of git revision ``REV`` (its ``api.py``,
``hoisting.py`` and ``slots.py``, loaded next to the current ones), interleaved with the current
one in the same rounds.
"""

from __future__ import annotations

import argparse
import cProfile
import importlib.util
import os
import pstats
import re
import statistics
import subprocess
import sys
import tempfile
import time
import types
from collections.abc import Callable
from typing import Any, Optional

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

import jta

from .workloads import HIDDEN, cell, make_inputs

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TRIVIAL = {"parameter", "constant", "get-tuple-element", "tuple", "bitcast"}


def staged(W: jax.Array, xs: jax.Array, offset: jax.Array, checks: bool = True) -> jax.Array:
    """W1u with the write index ``offset + t``: not known while tracing, so the decision is staged."""
    ta = jta.TensorArray(jnp.float32, size=xs.shape[0], element_shape=xs.shape[1:], checks=checks)

    def step(carry: Any, tx: Any) -> Any:
        h, ta = carry
        t, x = tx
        h = cell(W, h, x)
        return (h, ta.write(offset + t, h)), None

    (_, ta), _ = lax.scan(step, (jnp.zeros((HIDDEN,)), ta), (jnp.arange(xs.shape[0]), xs))
    return ta.stack()


def known(W: jax.Array, xs: jax.Array, offset: jax.Array) -> jax.Array:
    """W1u writing at the step: its indices are known while tracing (``offset`` unused)."""
    del offset
    ta = jta.TensorArray(jnp.float32, size=xs.shape[0], element_shape=xs.shape[1:])

    def step(carry: Any, tx: Any) -> Any:
        h, ta = carry
        t, x = tx
        h = cell(W, h, x)
        return (h, ta.write(t, h)), None

    (_, ta), _ = lax.scan(step, (jnp.zeros((HIDDEN,)), ta), (jnp.arange(xs.shape[0]), xs))
    return ta.stack()


def native(W: jax.Array, xs: jax.Array, offset: jax.Array) -> jax.Array:
    del offset
    return lax.scan(lambda h, x: (cell(W, h, x),) * 2, jnp.zeros((HIDDEN,)), xs)[1]


def cases(T: int) -> tuple[dict[str, Callable[[], Any]], dict[str, Any]]:
    """The timed calls (each blocks until its outputs are ready) and the callables under them."""
    W, xs = make_inputs(T, batch=None)
    offset = jnp.int32(0)
    jitted = {"native": jax.jit(native), "nochecks": jax.jit(lambda W, xs, o: staged(W, xs, o, checks=False)),
              "checkify": jax.jit(jta.checkify(staged)), "checked": jta.checked(staged),
              "checked_known": jta.checked(jax.jit(known))}

    # The record and the output are waited for one by one, as ``jta.checked`` and its caller do:
    # ``jax.block_until_ready`` of two arrays (a batched wait) costs about 2 µs more on XLA:CPU.
    def checkified() -> Any:
        errors, out = jitted["checkify"](W, xs, offset)
        errors.record.block_until_ready()
        return out

    def fetched() -> Any:  # the record's trip as ``jta.checked`` makes it: waited for, then converted
        errors, out = jitted["checkify"](W, xs, offset)
        errors.record.block_until_ready()
        np.asarray(errors.record)
        return out

    def blocked(name: str) -> Callable[[], Any]:
        return lambda: jax.block_until_ready(jitted[name](W, xs, offset))

    calls = {name: blocked(name) for name in ("native", "nochecks")}
    calls["checkify"] = lambda: jax.block_until_ready(checkified())
    calls["fetched"] = lambda: jax.block_until_ready(fetched())
    calls["checked"] = blocked("checked")
    calls["checked_known"] = blocked("checked_known")
    return calls, {**jitted, "args": (W, xs, offset)}


def interleaved_us(calls: dict[str, Callable[[], Any]], rounds: int, per_round: int, low: bool = True
                   ) -> dict[str, float]:
    """µs per call of each, over ``rounds`` rotated interleaved rounds: the 10th percentile
    (``low``), which other processes on the machine disturb least, or the median."""
    for call in calls.values():
        call(), call()  # compile, warm
    samples: dict[str, list[float]] = {k: [] for k in calls}
    names = list(calls)
    for r in range(rounds):
        for name in names[r % len(names):] + names[:r % len(names)]:
            call = calls[name]
            start = time.perf_counter()
            for _ in range(per_round):
                call()
            samples[name].append((time.perf_counter() - start) / per_round * 1e6)
    if low:
        return {k: statistics.quantiles(v, n=10)[0] for k, v in samples.items()}
    return {k: statistics.median(v) for k, v in samples.items()}


def per_call_us(calls: dict[str, Callable[[], Any]], samples: int, low: bool = True) -> dict[str, float]:
    """µs per call of each, timed call by call, the variants interleaved (in alternating order):
    the 10th percentile over ``samples`` calls of each (``low``), or the median."""
    for call in calls.values():
        for _ in range(10):
            call()  # compile, warm
    names = list(calls)
    times: dict[str, list[float]] = {k: [] for k in names}
    clock = time.perf_counter_ns
    for i in range(samples):
        for name in names if i % 2 else names[::-1]:
            call = calls[name]
            start = clock()
            call()
            times[name].append((clock() - start) / 1e3)
    if low:
        return {k: statistics.quantiles(v, n=10)[0] for k, v in times.items()}
    return {k: statistics.median(v) for k, v in times.items()}


def program_of(checked: Any) -> Any:
    """The ``jax.jit`` that a ``jta.checked`` function has compiled for its data-free plan."""
    for cell_ in checked.__closure__ or ():
        try:
            value = cell_.cell_contents
        except ValueError:
            continue
        if getattr(value, "__name__", "") == "compiled_for":
            return value({})
    raise LookupError("not a jta.checked function")


def hlo_counts(jitted: Any, args: tuple[Any, ...], options: Optional[dict[str, Any]] = None) -> dict[str, int]:
    """Kernels of the optimized HLO's entry computation (outside any loop: each runs once per
    call), its loops, and the program's outputs (``options``: XLA's, for the compilation)."""
    text = jitted.lower(*args).compile(compiler_options=options).as_text()
    entry = text[text.index("ENTRY"):]
    entry = entry[:entry.index("\n}")]
    ops = [re.search(r"\b([a-z][a-z0-9-]*)\((?:%|\))", ln.split("=", 1)[1]) for ln in entry.splitlines()[1:]
           if "=" in ln]
    names = [m.group(1) for m in ops if m]
    result = entry.splitlines()[0].split("->", 1)[1]
    outputs = len(re.findall(r"[a-z]+\d*\[[^\]]*\]", result))
    return {"entry_kernels": sum(n not in TRIVIAL for n in names), "whiles": names.count("while"),
            "outputs": outputs}


TRANSFERS = ("_value", "<built-in method numpy.asarray>", "<built-in method numpy.array>")  # to the host


def calls_per_call(call: Callable[[], Any], names: Any = None, n: int = 200) -> float:
    """Calls, per ``call()``, of the Python functions named in ``names`` (``None``: of all), from
    cProfile (after one call outside it)."""
    call()
    prof = cProfile.Profile()
    prof.enable()
    for _ in range(n):
        call()
    prof.disable()
    stats = pstats.Stats(prof).stats  # type: ignore[attr-defined]
    return sum(s[1] for (_, _, fn), s in stats.items() if names is None or fn in names) / n


def profile_calls(call: Callable[[], Any], n: int = 200) -> dict[str, float]:
    """Per call: Python function calls, and host transfers (``numpy.asarray`` of a jax array, or
    its ``_value``)."""
    return {"python_calls": calls_per_call(call, None, n), "to_host": calls_per_call(call, TRANSFERS, n)}


def _module_at(rev: str, path: str, name: str) -> types.ModuleType:
    """``path`` as of git revision ``rev``, loaded as module ``name`` (in jta's package, so that
    its relative imports find the current modules)."""
    source = subprocess.run(["git", "-C", ROOT, "show", f"{rev}:{path}"], check=True, capture_output=True,
                            text=True).stdout
    with tempfile.NamedTemporaryFile("w", suffix=".py", delete=False) as f:
        f.write(source)
    spec = importlib.util.spec_from_file_location(name, f.name)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def checked_at(rev: str, T: int) -> Callable[[], Any]:
    """A blocked call of ``jta.checked(staged)`` with the decision and wrapper of revision ``rev``."""
    from jta._delivery import hoisting  # noqa: PLC0415

    slots_then = _module_at(rev, "jta/_records/slots.py", "jta._records.slots_then")
    hoisting_then = _module_at(rev, "jta/_delivery/hoisting.py", "jta._delivery.hoisting_then")
    hoisting_then.replay = slots_then.replay  # type: ignore[attr-defined]
    api_then = _module_at(rev, "jta/_delivery/api.py", "jta._delivery.api_then")
    # A distinct function object: JAX's tracing caches must not hand it the current program.
    fn = types.FunctionType(staged.__code__, staged.__globals__, "staged_then", staged.__defaults__)
    then = api_then.checked(fn)  # type: ignore[attr-defined]
    W, xs = make_inputs(T, batch=None)
    offset = jnp.int32(0)
    now = hoisting.decide
    hoisting.decide = hoisting_then.decide  # type: ignore[attr-defined]
    try:
        jax.block_until_ready(then(W, xs, offset))  # traced and compiled with the old decision
    finally:
        hoisting.decide = now
    return lambda: jax.block_until_ready(then(W, xs, offset))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--rounds", type=int, default=300)
    parser.add_argument("--calls", type=int, default=20)
    parser.add_argument("--median", action="store_true", help="report medians, not 10th percentiles")
    parser.add_argument("--against", metavar="REV", help="also time jta.checked as of git revision REV")
    parser.add_argument("--per-call", action="store_true",
                        help="time single calls (--rounds of each, interleaved call by call), not rounds of --calls")
    args = parser.parse_args()
    calls, jitted = cases(args.steps)
    against: Optional[Callable[[], Any]] = checked_at(args.against, args.steps) if args.against else None
    if against is not None:
        calls[f"checked@{args.against}"] = against
    for name in ("native", "nochecks", "checkify"):
        print(f"{name:>14}: optimized HLO {hlo_counts(jitted[name], jitted['args'])}")
    for name in ("checked", "checked_known"):
        print(f"{name:>14}: optimized HLO {hlo_counts(program_of(jitted[name]), jitted['args'])}")
    what = "median" if args.median else "10th percentile"
    if args.per_call:
        us = per_call_us(calls, args.rounds, low=not args.median)
        print(f"µs per call ({what} of {args.rounds} single calls of each, interleaved, T={args.steps}):")
    else:
        us = interleaved_us(calls, args.rounds, args.calls, low=not args.median)
        print(f"µs per call ({what} of {args.rounds} interleaved rounds of {args.calls} calls, T={args.steps}):")
    for name, v in us.items():
        print(f"  {name:>22}: {v:7.1f}")
    print(f"  program (nochecks - native):    {us['nochecks'] - us['native']:6.1f}")
    print(f"  decision (checkify - nochecks): {us['checkify'] - us['nochecks']:6.1f}")
    print(f"  transfer (fetched - checkify):  {us['fetched'] - us['checkify']:6.1f}")
    print(f"  python (checked - fetched):     {us['checked'] - us['fetched']:6.1f}")
    print(f"  staged: checked - native:       {us['checked'] - us['native']:6.1f}")
    print(f"  known:  checked - native:       {us['checked_known'] - us['native']:6.1f}")
    for name in ("checked", "checked_known"):
        print(f"{name} per call: {profile_calls(calls[name])}")


if __name__ == "__main__":
    main()
