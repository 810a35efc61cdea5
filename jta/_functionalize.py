"""Thread one error record through a program: every ``jta_check`` becomes a select.

:func:`functionalize` traces a function to a jaxpr and evaluates it again, equation by
equation, carrying an integer record ``[code, v1, v2, v3, site]`` (the first error in program
order). A ``jta_check`` merges its record with one fused select; a loop carries the record in
its state; a conditional passes it through its branches. Equations that cannot report an
error (no ``jta_check`` inside) are bound unchanged, so the rest of the program (custom
derivatives, shardings, donation) is untouched. A higher-order primitive this module does not
know keeps its checks, which then raise through the fallback of ``_check_op``: an error is
never lost, only not functionalized.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from jax._src import core, source_info_util
from jax._src.ad_checkpoint import remat_p
from jax._src.custom_derivatives import custom_jvp_call_p, custom_vjp_call_p
from jax._src.pjit import jit_p

from ._check_op import RECORD_SIZE, ErrorEffect, check_p, entry


def no_error() -> jax.Array:
    return jnp.zeros((RECORD_SIZE,), jax.dtypes.canonicalize_dtype(np.int64))


@dataclasses.dataclass(frozen=True)
class Static:
    """An argument passed as is, never traced (``static_argnums``/``static_argnames``)."""

    value: Any


def mark_static(f: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any],
                static_argnums: Any = None, static_argnames: Any = None) -> tuple[tuple[Any, ...], dict[str, Any]]:
    """Wrap the static arguments in :class:`Static`: those given, else those of ``f``'s own
    ``jax.jit`` (so that ``jta.checked(jax.jit(g, static_argnums=1))`` keeps them static)."""
    info = getattr(f, "_jit_info", None)  # a jax.jit-wrapped function's options
    if static_argnums is None and static_argnames is None and info is not None:
        static_argnums, static_argnames = info.static_argnums, info.static_argnames
    nums = {static_argnums} if isinstance(static_argnums, int) else set(static_argnums or ())
    names = {static_argnames} if isinstance(static_argnames, str) else set(static_argnames or ())
    nums = {n % len(args) if args else n for n in nums}
    return (tuple(Static(a) if k in nums and not isinstance(a, Static) else a for k, a in enumerate(args)),
            {k: Static(v) if k in names and not isinstance(v, Static) else v for k, v in kwargs.items()})


def functionalize(f: Callable[..., Any], static_argnums: Any = None, static_argnames: Any = None
                  ) -> Callable[..., tuple[jax.Array, Any]]:
    """``f`` returning ``(record, out)``: its first TensorArray error as data, and its value."""

    def run(*args: Any, **kwargs: Any) -> tuple[jax.Array, Any]:
        # Arrays and Python numbers are traced, as ``jax.jit`` traces them; other leaves
        # (strings, callables, ...) and static arguments are closed over.
        dynamic, inputs = split(mark_static(f, args, kwargs, static_argnums, static_argnames))
        outputs: list[Split] = []

        def flat(*dynamic: Any) -> Any:
            a, kw = inputs.rebuild(dynamic)
            a = tuple(x.value if isinstance(x, Static) else x for x in a)
            kw = {k: v.value if isinstance(v, Static) else v for k, v in kw.items()}
            arrays, out = split(f(*a, **kw))
            outputs.append(out)
            return arrays

        closed = jax.make_jaxpr(flat)(*dynamic)
        error, outs = eval_jaxpr(closed.jaxpr, closed.consts, no_error(), *dynamic)
        return error, outputs[0].rebuild(outs)

    return run


@dataclasses.dataclass(frozen=True)
class Split:
    """A pytree with its traceable leaves taken out (:func:`split`): its structure and its other
    leaves (a raw-op handle, a string, a :class:`Static`). Hashable when those leaves are."""

    tree: Any
    traced: tuple[bool, ...]
    others: tuple[Any, ...]

    def rebuild(self, arrays: Any) -> Any:
        """The pytree, with ``arrays`` as its traceable leaves."""
        dyn, other = iter(arrays), iter(self.others)
        return jax.tree_util.tree_unflatten(self.tree, [next(dyn) if t else next(other) for t in self.traced])


def split(tree: Any) -> tuple[list[Any], Split]:
    """``tree``'s traceable leaves (what may enter or leave a traced function), and the rest."""
    leaves, treedef = jax.tree_util.tree_flatten(tree)
    traced = tuple(is_traceable(x) for x in leaves)
    return ([x for x, t in zip(leaves, traced, strict=True) if t],
            Split(treedef, traced, tuple(x for x, t in zip(leaves, traced, strict=True) if not t)))


def is_traceable(x: Any) -> bool:
    """Whether ``jax.jit`` would trace the argument leaf ``x`` (an array or a Python number)."""
    return isinstance(x, (jax.Array, np.ndarray, np.generic, bool, int, float, complex))


def _reports(eqn: core.JaxprEqn) -> bool:
    return any(isinstance(e, ErrorEffect) for e in eqn.effects)


def eval_jaxpr(jaxpr: core.Jaxpr, consts: Any, error: jax.Array, *args: Any,
               skip: Any = None) -> tuple[jax.Array, list[Any]]:
    """Evaluate ``jaxpr`` threading ``error``; the equation ``skip`` (if any) is left out."""
    env: dict[core.Var, Any] = {}

    def read(v: Any) -> Any:
        return v.val if isinstance(v, core.Literal) else env[v]

    for var, val in zip(jaxpr.constvars, consts, strict=True):
        env[var] = val
    for var, val in zip(jaxpr.invars, args, strict=True):
        env[var] = val
    for eqn in jaxpr.eqns:
        if eqn is skip:
            continue
        invals = [read(v) for v in eqn.invars]
        rule = _RULES.get(eqn.primitive) if _reports(eqn) else None
        name_stack = source_info_util.current_name_stack() + eqn.source_info.name_stack
        with source_info_util.user_context(eqn.source_info.traceback, name_stack=name_stack), eqn.ctx.manager:
            if rule is None:
                outs = eqn.primitive.bind(*invals, **eqn.primitive.get_bind_params(eqn.params))
            else:
                error, outs = rule(error, *invals, **eqn.params)
        if not eqn.primitive.multiple_results:
            outs = [outs]
        for var, val in zip(eqn.outvars, outs, strict=True):
            env[var] = val
    return error, [read(v) for v in jaxpr.outvars]


def _closed(closed: core.ClosedJaxpr, skip: Any = None) -> Callable[..., tuple[jax.Array, list[Any]]]:
    return lambda error, *args: eval_jaxpr(closed.jaxpr, closed.consts, error, *args, skip=skip)


def _after_loop(body: core.Jaxpr, carry_out: list[core.Var]) -> tuple[Any, int, Any]:
    """``(check, k, site)`` when the only report of a loop body is a deferred check of the
    record that the body returns as its carry ``k``, else ``(None, -1, None)``.

    That check can move after the loop: a deferred record is an array's, which keeps its first
    error (so the carried-out record holds the error of the step that made it), and with no
    other report in the body no error of a later step can come before it. This saves a select
    and a copy per step of a loop that writes one array (W1: 3x faster on unbatched steps).
    """
    reports = [eqn for eqn in body.eqns if _reports(eqn)]
    if len(reports) == 1 and reports[0].primitive is check_p and reports[0].params["deferred"]:
        record, site = reports[0].invars
        if isinstance(site, core.Literal) and not isinstance(record, core.Literal):
            for k, var in enumerate(carry_out):
                if var is record:
                    return reports[0], k, site.val
    return None, -1, None


# -- rules: (error, *operands, **params) -> (error, outputs) ---------------------------------
def _check(error: jax.Array, record: jax.Array, site: Any, **_: Any) -> tuple[jax.Array, list[Any]]:
    return jnp.where((error[0] == 0) & (record[0] != 0), entry(record, site, error.dtype), error), []


def _jit(error: jax.Array, *args: Any, jaxpr: core.ClosedJaxpr, **_: Any) -> tuple[jax.Array, list[Any]]:
    # Inlined: this runs inside the caller's trace already, which is compiled as one program.
    return _closed(jaxpr)(error, *args)


def _scan(error: jax.Array, *args: Any, jaxpr: core.ClosedJaxpr, num_consts: int, num_carry: int,
          length: int, reverse: bool, unroll: Any, **_: Any) -> tuple[jax.Array, list[Any]]:
    consts, carry, xs = args[:num_consts], args[num_consts:num_consts + num_carry], args[num_consts + num_carry:]
    moved, k, site = _after_loop(jaxpr.jaxpr, jaxpr.jaxpr.outvars[:num_carry])
    body = _closed(jaxpr, skip=moved)

    def step(c: Any, x: Any) -> Any:
        err, outs = body(c[0], *consts, *c[1], *x)
        return (err, outs[:num_carry]), outs[num_carry:]

    (error, carry_out), ys = lax.scan(step, (error, list(carry)), list(xs), length=length,
                                      reverse=reverse, unroll=unroll)
    if moved is not None:
        error = _check(error, carry_out[k], site)[0]
    return error, [*carry_out, *ys]


def _while(error: jax.Array, *args: Any, cond_jaxpr: core.ClosedJaxpr, body_jaxpr: core.ClosedJaxpr,
           cond_nconsts: int, body_nconsts: int) -> tuple[jax.Array, list[Any]]:
    cconsts, bconsts = args[:cond_nconsts], args[cond_nconsts:cond_nconsts + body_nconsts]
    init = list(args[cond_nconsts + body_nconsts:])
    moved, k, site = _after_loop(body_jaxpr.jaxpr, body_jaxpr.jaxpr.outvars)
    if any(_reports(eqn) for eqn in cond_jaxpr.jaxpr.eqns):
        moved = None
    cond, body = _closed(cond_jaxpr), _closed(body_jaxpr, skip=moved)
    # A check in the loop condition (rare) is merged after the loop stops and each time the
    # body runs, which is when the condition ran. A while that vmap gave a per-member predicate
    # runs while any member runs and keeps the carries of finished members, as its lowering
    # does (their checks still run: README, "vmap and checks").
    def cond_fn(c: Any) -> Any:
        return jnp.any(cond(c[0], *cconsts, *c[1])[1][0])

    def body_fn(c: Any) -> Any:
        err, (pred,) = cond(c[0], *cconsts, *c[1])
        err, new = body(err, *bconsts, *c[1])
        if jnp.ndim(pred):
            new = [jnp.where(jnp.reshape(pred, pred.shape + (1,) * (jnp.ndim(n) - pred.ndim)), n, o)
                   for n, o in zip(new, c[1], strict=True)]
        return err, new

    error, out = lax.while_loop(cond_fn, body_fn, (error, init))
    error, _ = cond(error, *cconsts, *out)
    if moved is not None:
        error, _ = _check(error, out[k], site)
    return error, out


def _cond(error: jax.Array, index: Any, *args: Any, branches: tuple[core.ClosedJaxpr, ...],
          **_: Any) -> tuple[jax.Array, list[Any]]:
    def branch(closed: core.ClosedJaxpr) -> Callable[..., Any]:
        return lambda e, ops: tuple(_closed(closed)(e, *ops))

    error, outs = lax.switch(index, [branch(b) for b in branches], error, list(args))
    return error, list(outs)


def _remat(error: jax.Array, *args: Any, jaxpr: core.Jaxpr, prevent_cse: bool, policy: Any,
           **_: Any) -> tuple[jax.Array, list[Any]]:
    def fn(e: Any, *a: Any) -> Any:
        return eval_jaxpr(jaxpr, (), e, *a)

    return jax.checkpoint(fn, prevent_cse=prevent_cse, policy=policy)(error, *args)


def _custom_call(error: jax.Array, *args: Any, call_jaxpr: core.ClosedJaxpr, **_: Any
                 ) -> tuple[jax.Array, list[Any]]:
    # A custom derivative around a check: the primal computation, inlined (jta defines none).
    return _closed(call_jaxpr)(error, *args)


_RULES: dict[Any, Callable[..., tuple[jax.Array, list[Any]]]] = {
    check_p: _check, jit_p: _jit, lax.scan_p: _scan, lax.while_p: _while, lax.cond_p: _cond,
    remat_p: _remat, custom_jvp_call_p: _custom_call, custom_vjp_call_p: _custom_call,
}
