"""Thread one error record through a program: every ``jta_check`` becomes a select.

:func:`functionalize` traces a function to a jaxpr and evaluates it again, equation by
equation, carrying an integer record ``[code, v1, v2, v3, site]`` (the first error in program
order) and, at trace time, the table of :class:`~jta._records.primitives.Site` that its ``site`` field
indexes. A ``jta_check`` merges its record with one fused select; each primitive that holds a
jaxpr has one rule here, which threads the record through it (a loop carries it, a conditional
passes it through its branches, a call or custom derivative is re-bound with a threaded body).
Equations that cannot report an error (no ``ErrorEffect``) are bound unchanged. An equation
that reports an error through a primitive without a rule is refused at trace time
(:data:`Error.UNSUPPORTED_PRIMITIVE`): an error is never silently lost.
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
import operator
from collections.abc import Callable
from typing import Any, Optional

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from jax._src import api_util, config, core, source_info_util
from jax._src import linear_util as lu
from jax._src import mesh as mesh_lib
from jax._src import shard_map as shard_map_lib
from jax._src.ad_checkpoint import remat_p
from jax._src.ad_util import Zero
from jax._src.custom_derivatives import custom_jvp_call_p, custom_vjp_call_p
from jax._src.interpreters import partial_eval as pe
from jax._src.lax import lax as lax_internal
from jax._src.pjit import jit_p
from jax._src.sharding_impls import UNSPECIFIED

from .._records.catalogue import Error, learns
from .._records.primitives import (
    RECORD_SIZE,
    ErrorEffect,
    Site,
    check_p,
    entry,
    first_error,
    first_failing,
    merged,
    no_error,
    record_p,
)
from . import hoisting, known

# A loop that recorded an error to learn from runs on up to this many times the steps it had run
# then (the work it may waste, once per size learned, when a value read past the buffer keeps it going).
LEARNING_STEPS = 8


class SiteTable:
    """The sites a functionalized record can name (built at trace time, static): each check's
    ``sites`` tuple is appended once, and its record's ``site`` field offset into the table."""

    def __init__(self) -> None:
        self.sites: list[Site] = []
        self._offsets: dict[tuple[Site, ...], int] = {}
        self.known: dict[int, Any] = {}  # the memo of ``known.value`` for this trace

    def offset(self, sites: tuple[Site, ...]) -> int:
        if sites not in self._offsets:
            self._offsets[sites] = len(self.sites)
            self.sites.extend(sites)
        return self._offsets[sites]


# -- arguments --------------------------------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class Static:
    """An argument passed as is, never traced (``static_argnums``/``static_argnames``)."""

    value: Any


def static_arguments(f: Callable[..., Any], static_argnums: Any, static_argnames: Any
                     ) -> tuple[tuple[int, ...], tuple[str, ...]]:
    """Both forms of ``f``'s static arguments, resolved through its signature as ``jax.jit``
    resolves them; by default those of ``f``'s own ``jax.jit``, if it is one."""
    info = getattr(f, "_jit_info", None)
    if static_argnums is None and static_argnames is None and info is not None:
        return tuple(info.static_argnums), tuple(info.static_argnames)
    try:
        signature: Optional[inspect.Signature] = inspect.signature(f)
    except (TypeError, ValueError):
        signature = None
    if signature is None:
        nums = (static_argnums,) if isinstance(static_argnums, int) else tuple(static_argnums or ())
        names = (static_argnames,) if isinstance(static_argnames, str) else tuple(static_argnames or ())
        return nums, names
    nums, names = api_util.infer_argnums_and_argnames(signature, static_argnums, static_argnames)
    return tuple(nums), tuple(names)


def mark_static(args: tuple[Any, ...], kwargs: dict[str, Any], nums: tuple[int, ...], names: tuple[str, ...]
                ) -> tuple[tuple[Any, ...], dict[str, Any]]:
    """Wrap the static arguments in :class:`Static` (negative numbers count from the end)."""
    positions = {n % len(args) if args and n < 0 else n for n in nums}
    return (tuple(Static(a) if k in positions else a for k, a in enumerate(args)),
            {k: Static(v) if k in names else v for k, v in kwargs.items()})


def functionalize(f: Callable[..., Any], static_argnums: Any = None, static_argnames: Any = None
                  ) -> Callable[..., tuple[jax.Array, tuple[Site, ...], Any]]:
    """``f`` returning ``(record, sites, out)``: its first TensorArray error as data, the sites
    the record may name, and its value."""
    nums, names = static_arguments(f, static_argnums, static_argnames)

    def run(*args: Any, **kwargs: Any) -> tuple[jax.Array, tuple[Site, ...], Any]:
        # Arrays and Python numbers are traced, as ``jax.jit`` traces them; other leaves
        # (strings, callables, ...) and static arguments are closed over.
        dynamic, inputs = split(mark_static(args, kwargs, nums, names))
        outputs: list[Split] = []

        def flat(*dynamic: Any) -> Any:
            a, kw = inputs.rebuild(dynamic)
            a = tuple(x.value if isinstance(x, Static) else x for x in a)
            kw = {k: v.value if isinstance(v, Static) else v for k, v in kw.items()}
            arrays, out = split(f(*a, **kw))
            outputs.append(out)
            return arrays

        closed = jax.make_jaxpr(flat)(*dynamic)
        table = SiteTable()
        error, outs = eval_jaxpr(table, closed.jaxpr, closed.consts, no_error(RECORD_SIZE), *dynamic)
        return error, tuple(table.sites), outputs[0].rebuild(outs)

    return run


@dataclasses.dataclass(frozen=True)
class Split:
    """A pytree with its traceable leaves taken out (:func:`split`): its structure and its other
    leaves (a raw-op handle, a string, a :class:`Static`)."""

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


# -- the interpreter --------------------------------------------------------------------------
def reports(eqn: core.JaxprEqn) -> bool:
    """Whether ``eqn`` may report a TensorArray error: its effects say so, or a jaxpr among its
    parameters holds a check (a primitive whose abstract evaluation drops its body's effects,
    such as ``lax.composite``, would otherwise be bound as it is and its checks skipped; without a
    rule it is refused at trace time)."""
    return any(isinstance(e, ErrorEffect) for e in eqn.effects) or any(
        holds_checks(j) for j in core.jaxprs_in_params(eqn.params))


def holds_checks(jaxpr: core.Jaxpr) -> bool:
    """Whether ``jaxpr`` holds a check, at any depth (its effects may not say so: a body holding a
    ``lax.composite`` that holds one)."""
    return any(isinstance(e, ErrorEffect) for e in jaxpr.effects) or any(reports(eqn) for eqn in jaxpr.eqns)


def eval_jaxpr(table: SiteTable, jaxpr: core.Jaxpr, consts: Any, error: jax.Array, *args: Any,
               skip: frozenset[int] = frozenset(), outputs: Optional[dict[core.Var, core.Var]] = None
               ) -> tuple[jax.Array, list[Any]]:
    """Evaluate ``jaxpr`` threading ``error``. The equations whose ``id`` is in ``skip`` are left
    out, and ``outputs`` replaces output variables."""
    env: dict[core.Var, Any] = {}

    def read(v: Any) -> Any:
        return v.val if isinstance(v, core.Literal) else env[v]

    for var, val in zip(jaxpr.constvars, consts, strict=True):
        env[var] = val
    for var, val in zip(jaxpr.invars, args, strict=True):
        env[var] = val
    for eqn in jaxpr.eqns:
        if id(eqn) in skip:
            continue
        invals = [read(v) for v in eqn.invars]
        name_stack = source_info_util.current_name_stack() + eqn.source_info.name_stack
        with source_info_util.user_context(eqn.source_info.traceback, name_stack=name_stack), eqn.ctx.manager:
            if not reports(eqn):
                outs = eqn.primitive.bind(*invals, **eqn.primitive.get_bind_params(eqn.params))
            else:
                rule = RULES.get(eqn.primitive)
                if rule is None:
                    Error.UNSUPPORTED_PRIMITIVE.raise_(primitive=eqn.primitive.name)
                error, outs = rule(table, error, *invals, **eqn.params)
        if not eqn.primitive.multiple_results:
            outs = [outs]
        for var, val in zip(eqn.outvars, outs, strict=True):
            env[var] = val
    outputs = outputs or {}
    return error, [read(outputs.get(v, v) if not isinstance(v, core.Literal) else v) for v in jaxpr.outvars]


def _closed(table: SiteTable, closed: core.ClosedJaxpr, skip: frozenset[int] = frozenset(),
            outputs: Optional[dict[core.Var, core.Var]] = None) -> Callable[..., tuple[jax.Array, list[Any]]]:
    return lambda error, *args: eval_jaxpr(table, closed.jaxpr, closed.consts, error, *args, skip=skip,
                                           outputs=outputs)


def _threaded(table: SiteTable, closed: core.ClosedJaxpr, avals: list[Any], what: str
              ) -> tuple[core.ClosedJaxpr, list[Any]]:
    """``closed`` as a jaxpr ``(*consts, error, *args) -> (error, *outs)``, and its consts."""
    def fn(error: Any, *args: Any) -> list[Any]:
        error, outs = eval_jaxpr(table, closed.jaxpr, closed.consts, error, *args)
        return [error, *outs]

    in_avals = [core.typeof(no_error(RECORD_SIZE)), *avals]
    debug = api_util.debug_info(what, fn, tuple(in_avals), {})
    jaxpr, _, consts = pe.trace_to_jaxpr_dynamic(lu.wrap_init(fn, debug_info=debug), in_avals)
    return core.ClosedJaxpr(pe.convert_constvars_jaxpr(jaxpr), ()), consts


# -- moving a check out of a loop ---------------------------------------------------------------
def _descends(body: core.Jaxpr, record: Any, origin: core.Var) -> bool:
    """Whether the record ``record`` is ``origin`` updated only by ``jta_record`` and ``jta_slot``
    equations (each keeps an error already recorded, so ``record`` holds any error ``origin``
    holds)."""
    producers = {var: eqn for eqn in body.eqns for var in eqn.outvars}
    return isinstance(hoisting.lineage(record, producers, {origin: 0}).root, int)  # (it reached ``origin``)


@dataclasses.dataclass(frozen=True)
class Moved:
    """A loop body's check moved after the loop: the deferred check of carry ``k``'s record."""

    eqn: core.JaxprEqn
    k: int
    site: Any
    sites: tuple[Site, ...]

    @property
    def skip(self) -> frozenset[int]:
        """What the loop body no longer runs (``eval_jaxpr``'s ``skip``)."""
        return frozenset({id(self.eqn)})

    def check(self, table: SiteTable, error: jax.Array, carry: list[Any]) -> jax.Array:
        return _check(table, error, carry[self.k], self.site, sites=self.sites)[0]


def _movable(body: core.Jaxpr, carry_in: list[core.Var], carry_out: list[Any]) -> Optional[Moved]:
    """The body's check that may move after the loop, if any.

    Invariant (why the move is sound): the body's only report is a deferred check of the record
    that the body returns as its carry ``k``, and that record descends from the body's carry-in
    ``k`` through ``jta_record`` updates only (:func:`_descends`). Then carry ``k``'s record
    after step ``t`` holds the first error of steps ``0..t`` (each step keeps the error it was
    given, and no other report in the body can come before it), so checking it once after the
    loop reports the same first error as checking it in every step. A carry that another carry
    replaces (swapped carries), an array made in the body, or a record chosen by a ``cond`` or
    a select breaks the chain, and the check stays in the loop.
    """
    found = [eqn for eqn in body.eqns if reports(eqn)]
    if len(found) != 1 or found[0].primitive is not check_p or not found[0].params["deferred"]:
        return None
    (eqn,) = found
    record, site = eqn.invars
    if not isinstance(site, core.Literal) or isinstance(record, core.Literal):
        return None
    for k, var in enumerate(carry_out):
        if var is record and _descends(body, record, carry_in[k]):
            return Moved(eqn, k, site.val, eqn.params["sites"])
    return None


# -- rules: (table, error, *operands, **params) -> (error, outputs) ----------------------------
def _check(table: SiteTable, error: jax.Array, record: jax.Array, site: Any, *, sites: tuple[Site, ...],
           **_: Any) -> tuple[jax.Array, list[Any]]:
    now = known.value(record, table.known)
    if now is not None and not np.any(now[..., 0]):
        return error, []  # a record known while tracing to hold no error: nothing to stage
    record, site = first_failing(record, jnp.asarray(site))
    site = site + table.offset(sites)
    return merged(error, record[0] != 0, entry(record, site, error.dtype), learns=_learns(sites)), []


def _learns(sites: tuple[Site, ...]) -> bool:
    """Whether a check of ``sites`` may report a record to learn from (:data:`LEARNS`): a
    planned array's (each of its sites names its plan) or a planned TensorList's."""
    return any(key in ("plan", "grows") for site in sites for key, _ in site.fields)


def _may_learn(jaxpr: core.Jaxpr) -> bool:
    """Whether ``jaxpr`` (or one it holds) may record an error to learn from."""
    for eqn in jaxpr.eqns:
        if eqn.primitive is check_p and _learns(eqn.params["sites"]):
            return True
        if eqn.primitive is record_p and eqn.params["learns"]:
            return True
        if any(_may_learn(sub) for sub in core.jaxprs_in_params(eqn.params)):
            return True
    return False


def _inline(table: SiteTable, error: jax.Array, *args: Any, call_jaxpr: Any, **_: Any) -> tuple[jax.Array, list[Any]]:
    # closed_call / core_call: a call with no parameters worth keeping.
    closed = call_jaxpr if isinstance(call_jaxpr, core.ClosedJaxpr) else core.ClosedJaxpr(call_jaxpr, ())
    return _closed(table, closed)(error, *args)


def _composite(table: SiteTable, error: jax.Array, *args: Any, jaxpr: core.ClosedJaxpr, **params: Any
               ) -> tuple[jax.Array, list[Any]]:
    # Re-bound with the threaded decomposition (the record and its consts first), keeping the
    # composite's name, attributes and version for the backends that match it.
    threaded, consts = _threaded(table, jaxpr, [core.typeof(a) for a in args], "jta.checkify of composite")
    error, *outs = lax_internal.composite_p.bind(*consts, error, *args, jaxpr=threaded, **params)
    return error, outs


def _jit(table: SiteTable, error: jax.Array, *args: Any, jaxpr: core.ClosedJaxpr, **params: Any
         ) -> tuple[jax.Array, list[Any]]:
    # Re-bound with the threaded body, keeping the inner jit's shardings, layouts, donation,
    # name and compiler options; the record (and the body's consts) enter unsharded, undonated.
    threaded, consts = _threaded(table, jaxpr, [core.typeof(a) for a in args], "jta.checkify of jit")
    lead = len(consts) + 1
    new = dict(params, jaxpr=threaded,
               in_shardings=(UNSPECIFIED,) * lead + tuple(params["in_shardings"]),
               out_shardings=(UNSPECIFIED,) + tuple(params["out_shardings"]),
               in_layouts=(None,) * lead + tuple(params["in_layouts"]),
               out_layouts=(None,) + tuple(params["out_layouts"]),
               donated_invars=(False,) * lead + tuple(params["donated_invars"]))
    error, *outs = jit_p.bind(*consts, error, *args, **new)
    return error, outs


def _scan(table: SiteTable, error: jax.Array, *args: Any, jaxpr: core.ClosedJaxpr, num_consts: int,
          num_carry: int, length: int, reverse: bool, unroll: Any, **_: Any) -> tuple[jax.Array, list[Any]]:
    consts, carry, xs = args[:num_consts], args[num_consts:num_consts + num_carry], args[num_consts + num_carry:]
    hoisted = hoisting.plan(jaxpr, num_consts, num_carry) if length > 0 else None
    if hoisted is not None:
        return _scan_hoisted(table, error, hoisted, jaxpr, consts, carry, xs, num_carry=num_carry, length=length,
                             reverse=reverse, unroll=unroll)
    invars = jaxpr.jaxpr.invars
    moved = _movable(jaxpr.jaxpr, invars[num_consts:num_consts + num_carry], jaxpr.jaxpr.outvars[:num_carry])
    body = _closed(table, jaxpr, skip=moved.skip if moved is not None else frozenset())

    def step(c: Any, x: Any) -> Any:
        err, outs = body(c[0], *consts, *c[1], *x)
        return (err, outs[:num_carry]), outs[num_carry:]

    (error, carry_out), ys = lax.scan(step, (error, list(carry)), list(xs), length=None if xs else length,
                                      reverse=reverse, unroll=unroll)
    if moved is not None:
        error = moved.check(table, error, carry_out)
    return error, [*carry_out, *ys]


def _scan_hoisted(table: SiteTable, error: jax.Array, plan: hoisting.Plan, jaxpr: core.ClosedJaxpr, consts: Any,
                  carry: Any, xs: Any, *, num_carry: int, length: int, reverse: bool, unroll: Any
                  ) -> tuple[jax.Array, list[Any]]:
    """A scan whose bookkeeping moved out of its body (``hoisting``): the loop runs the rest,
    and the moved records, flags and reports are decided after it, for all steps at once."""
    body_in = jaxpr.jaxpr.invars[len(consts):len(consts) + num_carry]
    body_out = jaxpr.jaxpr.outvars[:num_carry]
    kept = [k for k in range(num_carry) if k not in plan.moved]
    body = _closed(table, jaxpr, skip=plan.skip, outputs={body_out[k]: body_in[k] for k in plan.moved})

    def step(c: Any, x: Any) -> Any:
        now = list(carry)  # the moved carries' values are never read in the body
        for k, v in zip(kept, c[1], strict=True):
            now[k] = v
        err, outs = body(c[0], *consts, *now, *x)
        return (err, [outs[k] for k in kept]), outs[num_carry:]

    (error, kept_out), ys = lax.scan(step, (error, [carry[k] for k in kept]), list(xs), length=None if xs else length,
                                     reverse=reverse, unroll=unroll)
    offsets = [table.offset(eqn.params["sites"]) for eqn, _ in plan.reports]
    moved = hoisting.decide_known(plan, jaxpr, len(consts), num_carry, consts, carry, xs, length, reverse, offsets,
                                  error.dtype, table.known)
    if moved is not None:  # decided while tracing: nothing staged, or the error it found as a constant
        moved, fired, record = moved
        if fired:
            error = first_error(error, True, record)
    else:
        values = hoisting.per_step(plan, jaxpr, len(consts), num_carry, consts, carry, xs, length, reverse)
        moved, fired, record = hoisting.decide(plan, values, carry, length, offsets, error.dtype)
        error = first_error(error, fired, record)
    out = dict(zip(kept, kept_out, strict=True)) | moved
    return error, [*(out[k] for k in range(num_carry)), *ys]


def _while(table: SiteTable, error: jax.Array, *args: Any, cond_jaxpr: core.ClosedJaxpr,
           body_jaxpr: core.ClosedJaxpr, cond_nconsts: int, body_nconsts: int) -> tuple[jax.Array, list[Any]]:
    cconsts, bconsts = args[:cond_nconsts], args[cond_nconsts:cond_nconsts + body_nconsts]
    init = list(args[cond_nconsts + body_nconsts:])
    moved = None
    if not any(reports(eqn) for eqn in cond_jaxpr.jaxpr.eqns):
        moved = _movable(body_jaxpr.jaxpr, body_jaxpr.jaxpr.invars[body_nconsts:], body_jaxpr.jaxpr.outvars)
    cond, body = _closed(table, cond_jaxpr), _closed(table, body_jaxpr, skip=moved.skip if moved is not None else frozenset())
    learning = _may_learn(body_jaxpr.jaxpr)

    def codes(c: Any) -> list[Any]:
        words = [c[0][0]]
        if moved is not None:
            words.append(first_failing(c[1][moved.k], jnp.zeros((), c[0].dtype))[0][0])
        return words

    def clean(c: Any) -> Any:
        # The loop stops at the first error (its outputs are then unspecified): a loop whose
        # exit depends on a value read past the end would otherwise run for ever. After an
        # error to learn from (a write past a planned buffer) it runs on, up to LEARNING_STEPS
        # times the steps it had run then, so that the record holds what the buffer needs.
        words = codes(c)
        ok = functools.reduce(operator.and_, [w == 0 for w in words])
        if learning:
            steps, began = c[2]
            may = functools.reduce(operator.and_, [(w == 0) | learns(w) for w in words])
            ok = ok | (may & (steps < LEARNING_STEPS * began))
        return ok

    # A check in the loop condition (rare) is merged after the loop stops and each time the
    # body runs, which is when the condition ran. A while that vmap gave a per-member predicate
    # runs while any member runs and keeps the carries of finished members, as its lowering
    # does.
    def cond_fn(c: Any) -> Any:
        return jnp.any(cond(c[0], *cconsts, *c[1])[1][0]) & clean(c)

    def body_fn(c: Any) -> Any:
        err, (pred,) = cond(c[0], *cconsts, *c[1])
        err, new = body(err, *bconsts, *c[1])
        if jnp.ndim(pred):
            new = [jnp.where(jnp.reshape(pred, pred.shape + (1,) * (jnp.ndim(n) - pred.ndim)), n, o)
                   for n, o in zip(new, c[1], strict=True)]
        if not learning:
            return err, new
        steps, began = c[2]
        steps = steps + 1
        began = jnp.where((began == 0) & ~clean((err, new, (steps, began))), steps, began)
        return err, new, (steps, began)

    start = (error, init) if not learning else (error, init, (jnp.int32(0), jnp.int32(0)))
    error, out, *_ = lax.while_loop(cond_fn, body_fn, start)
    error, _ = cond(error, *cconsts, *out)
    if moved is not None:
        error = moved.check(table, error, out)
    return error, out


def _cond(table: SiteTable, error: jax.Array, index: Any, *args: Any, branches: tuple[core.ClosedJaxpr, ...],
          **_: Any) -> tuple[jax.Array, list[Any]]:
    def branch(closed: core.ClosedJaxpr) -> Callable[..., Any]:
        return lambda e, ops: tuple(_closed(table, closed)(e, *ops))

    error, outs = lax.switch(index, [branch(b) for b in branches], error, list(args))
    return error, list(outs)


def _remat(table: SiteTable, error: jax.Array, *args: Any, jaxpr: core.Jaxpr, prevent_cse: bool, policy: Any,
           **_: Any) -> tuple[jax.Array, list[Any]]:
    def fn(e: Any, *a: Any) -> Any:
        return eval_jaxpr(table, jaxpr, (), e, *a)

    return jax.checkpoint(fn, prevent_cse=prevent_cse, policy=policy)(error, *args)


def _custom_jvp(table: SiteTable, error: jax.Array, *args: Any, call_jaxpr: core.ClosedJaxpr, jvp_jaxpr_fun: Any,
                num_consts: int, symbolic_zeros: bool) -> tuple[jax.Array, list[Any]]:
    # The primal is threaded and the user's JVP rule kept: the rule's own checks are reported
    # where it runs (``jax.grad`` of a checkified function differentiates with the rule), the
    # primal's come back as data.
    params = custom_jvp_call_p.get_bind_params(dict(call_jaxpr=call_jaxpr, jvp_jaxpr_fun=jvp_jaxpr_fun,
                                                    num_consts=num_consts, symbolic_zeros=symbolic_zeros))
    _, jvp = params.pop("subfuns")

    @jax.custom_jvp
    def call(error: Any, *args: Any) -> Any:
        return _closed(table, call_jaxpr)(error, *args)

    @call.defjvp
    def _(primals: Any, tangents: Any) -> Any:
        err, *xs = primals
        outs = jvp.call_wrapped(*xs, *[_instantiate(t, x) for t, x in zip(tangents[1:], xs, strict=True)])
        n = len(outs) // 2
        return (err, outs[:n]), (np.zeros(err.shape, jax.dtypes.float0), outs[n:])

    return call(error, *args)


def _instantiate(tangent: Any, primal: Any) -> Any:
    return jnp.zeros_like(primal) if type(tangent).__name__ == "SymbolicZero" else tangent


def _custom_vjp(table: SiteTable, error: jax.Array, *args: Any, call_jaxpr: core.ClosedJaxpr, fwd_jaxpr_thunk: Any,
                num_consts: int, bwd: Any, out_trees: Any, symbolic_zeros: bool) -> tuple[jax.Array, list[Any]]:
    # The primal is threaded and the user's rule kept. Under ``jax.grad`` JAX runs the forward
    # rule instead of the primal: its checks are threaded too. The backward rule's checks are
    # reported where it runs (checkify a gradient to get them as data).
    params = custom_vjp_call_p.get_bind_params(dict(call_jaxpr=call_jaxpr, fwd_jaxpr_thunk=fwd_jaxpr_thunk,
                                                    num_consts=num_consts, bwd=bwd, out_trees=out_trees,
                                                    symbolic_zeros=symbolic_zeros))
    _, fwd, bwd_fun = params.pop("subfuns")

    @jax.custom_vjp
    def call(error: Any, *args: Any) -> Any:
        return _closed(table, call_jaxpr)(error, *args)

    def call_fwd(error: Any, *args: Any) -> Any:
        # (value, perturbed) pairs; the consts never are (JAX refuses it).
        perturbed = [k >= num_consts and jnp.issubdtype(jnp.result_type(a), jnp.inexact) for k, a in enumerate(args)]
        closed = jax.make_jaxpr(lambda *a: fwd.call_wrapped(*[v for pair in zip(a, perturbed, strict=True)
                                                               for v in pair]))(*args)
        error, flat = _closed(table, closed)(error, *args)  # the forward rule's checks, threaded
        _, res_tree, forwarded = out_trees()
        fresh = res_tree.num_leaves - sum(f is not None for f in forwarded)
        fresh_res, outs = iter(flat[:fresh]), flat[fresh:]
        res = [next(fresh_res) if f is None else args[f] for f in forwarded]
        return (error, list(outs)), tuple(res)

    def call_bwd(res: Any, cotangents: Any) -> Any:
        _, outs_ct = cotangents
        cts = bwd_fun.call_wrapped(*res, *outs_ct)
        # JAX's symbolic zeros (of integer inputs, of consts) are ``None`` to ``jax.custom_vjp``.
        return (None, *(None if isinstance(ct, Zero) else ct for ct in cts))

    call.defvjp(call_fwd, call_bwd)
    return call(error, *args)


def _shard_map(table: SiteTable, error: jax.Array, *args: Any, jaxpr: core.Jaxpr, in_specs: Any, out_specs: Any,
               **params: Any) -> tuple[jax.Array, list[Any]]:
    # Every device threads a replicated record through its shard; the devices then gather their
    # records: all report the first device (in mesh order) that failed, replicated.
    mesh, manual, check_vma = params["mesh"], params["newly_manual_axes"], params["check_vma"]
    spec = jax.sharding.PartitionSpec
    axes = tuple(a for a in mesh.axis_names if a in manual)
    in_specs = (spec(), *in_specs)
    avals = [core.typeof(error), *(core.typeof(a) for a in args)]
    avals = [core.shard_aval_handlers[type(v)](mesh, manual, check_vma, s, v) for s, v in zip(in_specs, avals, strict=True)]

    def body(err: Any, *xs: Any) -> list[Any]:
        err, outs = eval_jaxpr(table, jaxpr, (), err, *xs)
        # (pmin and psum, whose results are replicated, as ``check_vma`` wants them typed)
        device = lax.axis_index(axes)
        first = lax.pmin(jnp.where(err[0] != 0, device, np.iinfo(np.int32).max), axes)
        return [lax.psum(jnp.where(device == first, err, jnp.zeros_like(err)), axes), *outs]

    with (shard_map_lib._extend_axis_env(mesh, manual),
          mesh_lib.use_abstract_mesh(shard_map_lib._as_manual_mesh(mesh, manual)), config._check_vma(check_vma)):
        debug = api_util.debug_info("jta.checkify of shard_map", body, tuple(avals), {})
        threaded, _, consts = pe.trace_to_jaxpr_dynamic(lu.wrap_init(body, debug_info=debug), avals)
    # The threaded body's constants (the record's literals) enter replicated, before the record.
    new = shard_map_lib.shard_map_p.get_bind_params(dict(
        params, jaxpr=pe.convert_constvars_jaxpr(threaded), in_specs=(spec(),) * len(consts) + in_specs,
        out_specs=(spec(), *out_specs)))
    error, *outs = shard_map_lib.shard_map_p.bind(*consts, error, *args, **new)
    return error, outs


RULES: dict[Any, Callable[..., tuple[jax.Array, list[Any]]]] = {
    check_p: _check, jit_p: _jit, core.closed_call_p: _inline, core.call_p: _inline,
    lax.scan_p: _scan, lax.while_p: _while, lax.cond_p: _cond, remat_p: _remat,
    custom_jvp_call_p: _custom_jvp, custom_vjp_call_p: _custom_vjp, shard_map_lib.shard_map_p: _shard_map,
    lax_internal.composite_p: _composite,
}
