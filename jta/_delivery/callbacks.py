"""A bare ``jax.jit``'s checks: ``jta_check`` lowered to a host callback, and what the callbacks raised.

A program that ``jta.checkify``/``jta.checked`` did not interpret lowers each value op's
``jta_check`` to ``lax.cond(record != 0, host callback)``, which raises at run time (JAX reports
it as ``JaxRuntimeError``; :func:`take_raised` gives ``jta.throw()`` jta's exception back). A
mutator's check lowers to nothing: its error stays in the array or state it returns.
"""

from __future__ import annotations

import dataclasses
import functools
import threading
import time
from typing import Any, Optional

import jax
import numpy as np
from jax import lax
from jax.interpreters import mlir

from .._records.catalogue import Error
from .._records.primitives import RECORD_SIZE, Site, check_p, entry, exception, first_error


def _fallback(record: jax.Array, site: jax.Array, earlier: jax.Array, *, sites: tuple[Site, ...], offset: int,
              order: int, run_key: int) -> list[jax.Array]:
    """The program was not functionalized: a value-returning op raises from the host. ``earlier``
    is the first error (an entry, its site among the first sites) of the checks lowered before
    this one in the same block (``offset`` of them): whichever of them XLA runs first raises
    that error."""
    first = first_error(earlier, record[0] != 0, entry(record, site + offset, record.dtype))
    callback = functools.partial(_callback, run_key, order, sites)
    lax.cond(first[0] != 0, lambda: jax.debug.callback(callback, first), lambda: None)
    return [first]


_lower_fallback = mlir.lower_fun(_fallback, multiple_results=True)
# The first error of the value checks lowered so far, per block of the module being lowered:
# XLA runs independent callbacks in any order and stops the run at the first that raises, so
# each check raises the first error in program order of its block, not its own.
_EARLIER: dict[str, Any] = {"module": None, "blocks": {}}


def _lowering(ctx: Any, record: Any, site: Any, *, sites: tuple[Site, ...], deferred: bool, order: int) -> Any:
    if not deferred and ctx.module_context.lowering_parameters.for_export:
        # Say what to export now, rather than fail when the export is serialized.
        first = sites[0] if sites else Site("?")
        # (a site is a TensorArray's or an imported node's: named as it names itself)
        Error.EXPORT_NEEDS_CHECKIFY.raise_(what="the check of" if len(sites) == 1 else "jta.throw, for the checks of",
                                           name=first.name, where=first.where or "unknown")
    if deferred:
        return []
    if _EARLIER["module"] is not ctx.module_context:
        _EARLIER.update(module=ctx.module_context, blocks={})
    block = mlir.ir.InsertionPoint.current.block  # pyright: ignore[reportAttributeAccessIssue]
    dtype = ctx.avals_in[0].dtype
    earlier, earlier_sites = _EARLIER["blocks"].get(block, (None, ()))
    if earlier is None:
        earlier = mlir.ir_constant(np.zeros(RECORD_SIZE, dtype))
    aval = ctx.avals_in[0].update(shape=(RECORD_SIZE,))  # (inside shard_map: varying as the record)
    rule = ctx.replace(avals_in=[*ctx.avals_in, aval], avals_out=[aval])
    (first,) = _lower_fallback(rule, record, site, earlier, sites=earlier_sites + sites, offset=len(earlier_sites),
                               order=order, run_key=id(ctx.module_context))
    _EARLIER["blocks"][block] = (first, earlier_sites + sites)
    return []


mlir.register_lowering(check_p, _lowering, cacheable=False)  # inline: a block chains its checks


@dataclasses.dataclass(frozen=True)
class _Raised:
    exception: Exception
    run_key: int  # the compiled program it was raised in
    order: int  # its check's place in program order (trace order)
    time: float


def _callback(run_key: int, order: int, sites: tuple[Site, ...], record: Any) -> None:
    exc = exception(record, sites)
    if exc is not None:
        with _RAISED_LOCK:
            _RAISED.append(_Raised(exc, run_key, order, time.monotonic()))
            del _RAISED[:-_KEEP]
        raise exc


# The exceptions that callbacks raised in compiled code since the last ``take_raised``: one
# list for the process, since XLA calls back on threads of its own.
_RAISED: list[_Raised] = []
RAISED = _RAISED  # (the same list, which is never rebound: ``jta.checked`` looks at it on every call)
_RAISED_LOCK = threading.Lock()
_KEEP = 64
_RUN_WINDOW_S = 1.0  # callbacks of one failed run fail together: XLA stops it at the first


def take_raised(current: Optional[BaseException] = None) -> Optional[Exception]:
    """The first exception, in program order, that callbacks raised in the compiled run that
    failed last (or in the one whose ``JaxRuntimeError`` is ``current``); forgets them all.

    XLA runs unordered callbacks in any order and several may fail in one run, so the run's
    exceptions are compared by the trace order of their checks. Exceptions that earlier runs
    left behind (their ``JaxRuntimeError`` handled without a ``jta.throw()``) belong to other
    runs: another program, or another moment.
    """
    if not _RAISED:  # (every call of jta.checked asks: no lock when nothing was raised)
        return None
    with _RAISED_LOCK:
        raised = list(_RAISED)
        _RAISED.clear()
    if not raised:
        return None
    text = str(current) if current is not None else None
    anchor = next((r for r in reversed(raised) if text is not None and str(r.exception) in text), raised[-1])
    run = [r for r in raised if r.run_key == anchor.run_key and abs(r.time - anchor.time) < _RUN_WINDOW_S]
    return min(run, key=lambda r: r.order).exception
