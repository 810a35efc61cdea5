"""``vmap`` of a ``cond`` or ``while_loop`` whose predicate differs between batch members.

JAX batches such a ``cond`` by running every branch for every member and selecting the
results, and such a ``while_loop`` by running the body for every member while any member
runs. A check in a branch a member did not take, or in a step after its loop finished, would
then report an error that member never made. These rules wrap JAX's own: before JAX batches
them, each branch (each body) has its checks threaded into one record (``_functionalize``),
masked to the members that take that branch (whose predicate holds), and reported once. So
``jta.checked(jax.vmap(f))`` reports what ``jax.vmap(jta.checkify(f))`` reports.
"""

from __future__ import annotations

import operator
from typing import Any

import jax.numpy as jnp
from jax import lax
from jax._src import api_util, core
from jax._src import linear_util as lu
from jax._src.interpreters import batching
from jax._src.interpreters import partial_eval as pe

from .functionalize import SiteTable, eval_jaxpr, no_error, reports
from .primitives import bind, check_p

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
        error, outs = eval_jaxpr(table, closed.jaxpr, closed.consts, no_error(), *operands)
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
