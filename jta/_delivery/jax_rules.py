r"""Every change jta makes to JAX's own rules, in one place: what, why, and for which JAX.

Written for JAX 0.10 (``jax>=0.10,<0.11``); each change wraps or extends JAX's rule rather than
copying it, so that a JAX upgrade shows up as a failing test here, not as a silent divergence.

1. **Eager dispatch of** ``lax.scan_p``, ``lax.while_p``, ``lax.cond_p`` **(their** ``impl``\ **)** and an
   eager rule for ``jta_check`` inside an eagerly called ``shard_map`` (``shard_map.eager_rules``):
   eager code raises TensorFlow's exception, not ``JaxRuntimeError`` (section 1 below).
2. **Batching of** ``lax.cond_p`` **and** ``lax.while_p`` (``batching.fancy_primitive_batchers``):
   a check in a branch or step a member did not run counts for no member (section 2 below).
3. **A filter on the** ``jax._src.debugging`` **logger**: JAX logs a traceback for every exception
   raised in a debug callback; a jta check's exception reaches the user as an exception (its
   ``JaxRuntimeError``, then ``jta.throw()``), so its log record is dropped
   (section 3 below). Equinox adds and removes its filter around each call of its own; jta's
   callbacks run inside the user's bare ``jax.jit``, which jta does not wrap, so the filter
   stays, and passes every record that is not about a ``TensorArrayError``.

4. **Differentiation of** ``lax.scan_p`` (``ad.primitive_linearizations``, ``ad.primitive_jvps``): a
   scan whose TensorArray rows are written or read at indices fixed for each step is linearized
   (or JVP'd) as the loop an expert would write, its rows as stacked outputs and scanned inputs
   (``scan_rewrite``; section 4 below). Every other scan keeps JAX's rule.

5. **Reverse mode's hoisting of a scan's loop-invariant work** (``loops._scan_known_hoisting``, and
   ``pe.partial_eval_jaxpr_custom_rules[scan_p]`` under ``jax.checkpoint``) and a partial-eval rule
   for ``jta_check`` (``pe.custom_partial_eval_rules``): while JAX hoists, a check stays in the loop,
   so a loop-invariant check neither reports ahead of an earlier error of the first step nor
   fires when the loop runs no step (section 5 below).

6. **A config option,** ``jta_capacity_plan`` (defined in ``jta._core.capacities``, part of JAX's
   trace context): the sizes ``jta.checked`` learned, so that a ``jax.jit`` inside a checked
   function traces again with each plan instead of reusing a trace made without it.

jta's own primitives (``jta_record``, ``jta_check``, ``jta_slot``, ``add_row``, the loops' linear
primitive) register their rules where they are defined; they change nothing of JAX's.
"""

from __future__ import annotations

import contextlib
import contextvars
import functools
import logging
import operator
from collections.abc import Callable, Iterator
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from jax._src import api_util, core
from jax._src import linear_util as lu
from jax._src import shard_map as shard_map_lib
from jax._src.interpreters import ad, batching
from jax._src.interpreters import partial_eval as pe
from jax._src.lax.control_flow import loops

from .._records.primitives import RECORD_SIZE, bind, check_p, exception, first_failing_row, no_error
from ..errors import TensorArrayError
from . import scan_rewrite
from .functionalize import RULES, SiteTable, eval_jaxpr, holds_checks, reports

# -- 1. eager loops, conditionals and shard_map ---------------------------------------------------
# Eager loops and conditionals that hold a check raise TensorFlow's exception, not JAX's.
#
# Outside ``jax.disable_jit()``, JAX runs a ``lax.scan``, ``lax.while_loop`` or ``lax.cond`` called
# eagerly by compiling it (so does ``jax.vmap`` of one, even under ``disable_jit``). A check in its
# body would then lower to a host callback, whose exception JAX reports as ``JaxRuntimeError``
# with a traceback in its text: eager code would not get jta's class and text, and the error of
# a mutator (a double write) would be lost with the array it made.
#
# So when one of these primitives is applied eagerly and its body reports TensorArray errors
# (its jaxpr carries ``ErrorEffect``), it runs functionalized instead: compiled once per set of
# parameters, as JAX's own eager dispatch compiles it, threading one record through it, and the
# record's first error in program order is raised when the call returns. Other uses of these
# primitives (everything outside jta) keep JAX's implementation.

def _reports(params: dict[str, Any]) -> bool:
    """Whether a jaxpr among ``params`` may report a TensorArray error (at any depth)."""
    return any(holds_checks(j) for j in core.jaxprs_in_params(params))


@functools.lru_cache(maxsize=256)  # (as JAX caches its own eager executables)
def _functionalized(primitive: core.Primitive, params: tuple[tuple[str, Any], ...]
                    ) -> tuple[Any, SiteTable]:
    """``primitive`` with ``params``, threading a record, jitted; and its site table (filled
    when it is traced)."""
    table = SiteTable()
    rule = RULES[primitive]

    def run(*args: Any) -> Any:
        return rule(table, no_error(RECORD_SIZE), *args, **dict(params))

    return jax.jit(run), table


def _eager(primitive: core.Primitive) -> None:
    original = primitive.impl

    def impl(*args: Any, **params: Any) -> Any:
        if not _reports(params):
            return original(*args, **params)
        run, table = _functionalized(primitive, tuple(sorted(params.items())))
        record, outs = run(*args)
        error = exception(record, tuple(table.sites))
        if error is not None:
            raise error
        return outs

    primitive.def_impl(impl)


for _primitive in (lax.scan_p, lax.while_p, lax.cond_p):
    _eager(_primitive)


def _in_shard_map(mesh: Any, record: Any, site: Any, **params: Any) -> list[Any]:
    """A check applied eagerly inside ``shard_map``, whose ops JAX runs one by one (each compiled
    on its own, where a check would lower to a host callback): it raises at once, as eager code
    does, the first failing shard's error."""
    del mesh
    record = np.asarray(record)
    sites = np.broadcast_to(np.asarray(site, record.dtype), record.shape[:-1]).reshape(-1, 1)
    rows = np.concatenate([record.reshape(-1, record.shape[-1]), sites], axis=1)
    row = first_failing_row(rows)
    row = rows[0] if row is None else row
    return check_p.impl(row[:-1], row[-1], **params)


shard_map_lib.eager_rules[check_p] = _in_shard_map


# -- 2. vmap of a cond or while_loop whose predicate differs between members --------------------
# ``vmap`` of a ``cond`` or ``while_loop`` whose predicate differs between batch members.
#
# JAX batches such a ``cond`` by running every branch for every member and selecting the
# results, and such a ``while_loop`` by running the body for every member while any member
# runs. A check in a branch a member did not take, or in a step after its loop finished, would
# then report an error that member never made. These rules wrap JAX's own: before JAX batches
# them, each branch (each body) has its checks threaded into one record (``functionalize``),
# masked to the members that take that branch (whose predicate holds), and reported once. So
# each member reports only the errors it would make alone.

_cond_rule = batching.fancy_primitive_batchers[lax.cond_p]
_while_rule = batching.fancy_primitive_batchers[lax.while_p]


def _deferred_only(jaxpr: core.Jaxpr) -> bool:
    """Whether every report of ``jaxpr`` is a mutator's (deferred) check at its top level."""
    return all(eqn.primitive is check_p and eqn.params["deferred"] for eqn in jaxpr.eqns if reports(eqn))


def _masked(closed: core.ClosedJaxpr, extra_avals: list[Any], active: Any, what: str) -> core.ClosedJaxpr:
    """``closed`` taking leading ``extra`` operands, its checks reported as one record that
    counts only where ``active(extra, operands)`` holds."""
    deferred = _deferred_only(closed.jaxpr)
    n = len(extra_avals)

    def fn(*args: Any) -> list[Any]:
        extra, operands = args[:n], args[n:]
        table = SiteTable()
        error, outs = eval_jaxpr(table, closed.jaxpr, closed.consts, no_error(RECORD_SIZE), *operands)
        error = jnp.where(active(extra, operands), error, jnp.zeros_like(error))
        bind(error[:4], error[4], tuple(table.sites), deferred=deferred)
        return outs

    avals = [*extra_avals, *closed.in_avals]
    debug = api_util.debug_info(what, fn, tuple(avals), {})
    jaxpr, _, consts = pe.trace_to_jaxpr_dynamic(lu.wrap_init(fn, debug_info=debug), avals)
    return core.ClosedJaxpr(jaxpr, consts)


def _cond_batching(axis_data: Any, args: Any, dims: Any, *, branches: Any, **params: Any) -> Any:
    index_dim = dims[0]
    if index_dim is None or not any(reports(eqn) for b in branches for eqn in b.jaxpr.eqns):
        return _cond_rule(axis_data, args, dims, branches=branches, **params)
    # Each branch also takes the index, and its checks count where the index chose it.
    index_aval = core.ShapedArray((), args[0].dtype)
    masked = tuple(_masked(branch, [index_aval], lambda extra, _, k=k: extra[0] == k, "jta: a vmapped cond branch")
                   for k, branch in enumerate(branches))
    return _cond_rule(axis_data, (args[0], *args), (index_dim, *dims), branches=masked, **params)


def _predicate_batched(axis_data: Any, dims: Any, cond_nconsts: int, cond_jaxpr: Any, body_nconsts: int,
                       body_jaxpr: Any) -> bool:
    """Whether JAX will batch the loop's predicate (the fixpoint of JAX's own rule)."""
    batched = [d is not None for d in dims]
    cconsts, bconsts, carry = (batched[:cond_nconsts], batched[cond_nconsts:cond_nconsts + body_nconsts],
                               batched[cond_nconsts + body_nconsts:])
    for _ in range(1 + len(carry)):
        _, out = batching.batch_jaxpr(body_jaxpr, axis_data, bconsts + carry, instantiate=carry)
        if out == carry:
            break
        carry = list(map(operator.or_, carry, out))
    _, (pred,) = batching.batch_jaxpr(cond_jaxpr, axis_data, cconsts + carry, instantiate=False)
    return pred


def _while_batching(axis_data: Any, args: Any, dims: Any, *, cond_nconsts: int, cond_jaxpr: Any,
                    body_nconsts: int, body_jaxpr: Any) -> Any:
    params = dict(cond_nconsts=cond_nconsts, cond_jaxpr=cond_jaxpr, body_nconsts=body_nconsts, body_jaxpr=body_jaxpr)
    if (not any(reports(eqn) for eqn in body_jaxpr.jaxpr.eqns)
            or not _predicate_batched(axis_data, dims, **params)):
        return _while_rule(axis_data, args, dims, **params)
    # The body also takes the condition's consts, and its checks count where the condition
    # holds (JAX runs it for finished members too, and keeps their old carries).
    cond = core.jaxpr_as_fun(cond_jaxpr)
    body = _masked(body_jaxpr, cond_jaxpr.in_avals[:cond_nconsts],
                   lambda cconsts, ops: cond(*cconsts, *ops[body_nconsts:])[0], "jta: a vmapped while body")
    cconsts, cdims = args[:cond_nconsts], dims[:cond_nconsts]
    return _while_rule(axis_data, (*cconsts, *args), (*cdims, *dims), cond_nconsts=cond_nconsts,
                       cond_jaxpr=cond_jaxpr, body_nconsts=cond_nconsts + body_nconsts, body_jaxpr=body)


batching.fancy_primitive_batchers[lax.cond_p] = _cond_batching
batching.fancy_primitive_batchers[lax.while_p] = _while_batching


# -- 3. the log of debug callbacks ----------------------------------------------------------------
class _QuietCallbacks(logging.Filter):
    """Drops the log records of exceptions that jta's checks raised in a debug callback."""

    def filter(self, record: logging.LogRecord) -> bool:
        exc = record.exc_info[1] if record.exc_info else None
        return not isinstance(exc, TensorArrayError)


logging.getLogger("jax._src.debugging").addFilter(_QuietCallbacks())


# -- 4. differentiating a scan as the loop an expert would write ------------------------------------
# Reverse mode through a scan that writes a TensorArray row per step saves the index per step and
# carries the cotangent buffer through the backward loop, reading its row in every step; a scan
# that reads a closed-over array adds every row's cotangent into a carried buffer. When the rows'
# indices are fixed for each step (``scan_rewrite``), JAX is handed the same computation with the
# rows as the scan's stacked outputs and scanned inputs, put in place (gathered) once after
# (before) the loop, and differentiates a native scan. JAX's own rule does the work either way.
_scan_linearize = ad.primitive_linearizations[lax.scan_p]
_scan_jvp = ad.primitive_jvps[lax.scan_p]


def _linearize_scan(is_vjp: bool, nzs: Any, *primals: Any, **params: Any) -> Any:
    closed = scan_rewrite.rewritten(primals, params) if any(nzs) else None
    if closed is None:
        return _scan_linearize(is_vjp, nzs, *primals, **params)
    return scan_rewrite.linearize(closed, is_vjp, nzs, primals)


def _jvp_scan(primals: Any, tangents: Any, **params: Any) -> Any:
    closed = scan_rewrite.rewritten(primals, params)
    if closed is None:
        return _scan_jvp(primals, tangents, **params)
    return scan_rewrite.jvp(closed, primals, tangents)


ad.primitive_linearizations[lax.scan_p] = _linearize_scan
ad.primitive_jvps[lax.scan_p] = _jvp_scan


@contextlib.contextmanager
def jax_scan_rules() -> Iterator[None]:
    """JAX's own ``scan`` differentiation rules, the rewrite off (what the tests and the compile
    benchmark compare against)."""
    saved = ad.primitive_linearizations[lax.scan_p], ad.primitive_jvps[lax.scan_p]
    ad.primitive_linearizations[lax.scan_p], ad.primitive_jvps[lax.scan_p] = _scan_linearize, _scan_jvp
    try:
        yield
    finally:
        ad.primitive_linearizations[lax.scan_p], ad.primitive_jvps[lax.scan_p] = saved


# -- 5. reverse mode of a scan: checks stay in the loop ---------------------------------------------
# ``jax.grad`` of a ``lax.scan`` splits its body into a primal and a tangent scan, and then
# evaluates once, before the primal scan, everything of the body that depends only on its
# constants: loop-invariant work, computed once instead of per step (``loops._scan_known_hoisting``;
# under ``jax.checkpoint``, the same inside ``loops._scan_partial_eval_custom``). A check of a
# loop-invariant op (``ta.read(i)`` of an array the loop closes over) would then fire before the
# loop: ahead of an earlier op's error in the first step (the report is the first error in
# program order), and even when the loop runs no step. While JAX hoists, a check is staged into
# the loop as if its operands varied (the record it reports may still be computed outside).
_HOISTING = contextvars.ContextVar("jta_scan_hoisting", default=False)


def _hoisting(rule: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(rule)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        token = _HOISTING.set(True)
        try:
            return rule(*args, **kwargs)
        finally:
            _HOISTING.reset(token)
    return wrapper


def _check_partial_eval(trace: pe.JaxprTrace, *tracers: Any, **params: Any) -> Any:
    if _HOISTING.get():
        tracers = tuple(trace.instantiate_const(t) for t in tracers)  # known -> staged
    return trace.default_process_primitive(check_p, tracers, params)


loops._scan_known_hoisting = _hoisting(loops._scan_known_hoisting)
pe.partial_eval_jaxpr_custom_rules[lax.scan_p] = _hoisting(pe.partial_eval_jaxpr_custom_rules[lax.scan_p])
pe.custom_partial_eval_rules[check_p] = _check_partial_eval
