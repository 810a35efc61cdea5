"""``jta_check``: the one primitive through which a traced error leaves an op.

An op inside compiled code computes its error record (``[code, *values]``, see ``_checks``) as
data and binds ``jta_check(record, site)`` (``site`` numbers the array's name and fields). What happens next depends on who runs the program:

* :func:`jta.checkify` / :func:`jta.checked` interpret the program and thread one error record
  through it, the first error in program order winning (``_functionalize``): no branch and no
  host callback anywhere, so the program exports with ``jax.export``.
* Otherwise the primitive is lowered as it stands. A value-returning op (``deferred=False``)
  lowers to ``lax.cond(record != 0, host callback)``, which raises at run time; a mutator
  (``deferred=True``) lowers to nothing, its error stays in the array or state it returns.

The primitive carries an effect, so JAX's dead-code elimination keeps it even though it has
no outputs, and the effect is registered wherever JAX asks (control flow, custom derivatives,
remat, partial evaluation: the check stays with the primal computation under ``jax.grad``).
Defining a primitive and an effect needs ``jax._src`` (as JAX's own ``checkify`` does), hence
``jax>=0.10`` in ``pyproject.toml``; tested with jax 0.10.2.
"""

from __future__ import annotations

import functools
import itertools
import threading
from typing import Any, Optional

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from jax._src import core, effects
from jax._src.interpreters import partial_eval as pe
from jax.interpreters import ad, batching, mlir

from ._catalogue import Error


class ErrorEffect(effects.Effect):
    """The effect of ``jta_check``: "may report a TensorArray error"."""

    def __str__(self) -> str:
        return "TensorArrayError"

    # One effect, however made: ``jax.export`` rebuilds it with ``ErrorEffect()``.
    def __eq__(self, other: object) -> bool:
        return isinstance(other, ErrorEffect)

    def __hash__(self) -> int:
        return hash(ErrorEffect)


EFFECT = ErrorEffect()
for _allowed in (effects.lowerable_effects, effects.control_flow_allowed_effects,
                 effects.custom_derivatives_allowed_effects, effects.remat_allowed_effects,
                 effects.partial_eval_kept_effects):
    _allowed.add_type(ErrorEffect)

check_p = core.Primitive("jta_check")
check_p.multiple_results = True  # no results


# -- sites: the static half of an error (the array's name and its template fields) ----------
_SITES: dict[tuple[str, tuple[tuple[str, str], ...]], int] = {}
_SITE_INFO: list[tuple[str, dict[str, str]]] = []
_SITES_LOCK = threading.Lock()


def site_id(name: str, extra: Optional[dict[str, str]]) -> int:
    """A process-wide number for ``(name, extra)``, so that a record can name its array."""
    key = (name, tuple(sorted((extra or {}).items())))
    with _SITES_LOCK:
        if key not in _SITES:
            _SITES[key] = len(_SITE_INFO)
            _SITE_INFO.append((name, dict(key[1])))
        return _SITES[key]


RECORD_SIZE = 5  # code, three values, site


def exception(record: Any) -> Optional[Exception]:
    """The exception a concrete ``[code, v1, v2, v3, site]`` record describes (batched: the
    first batch member that failed), or ``None``."""
    records = np.asarray(record).reshape(-1, RECORD_SIZE)
    failed = np.nonzero(records[:, 0])[0]
    if not failed.size:
        return None
    code, *values, site = (int(v) for v in records[failed[0]])
    name, extra = _SITE_INFO[site]
    return Error.by_code(code).from_record(name, values, extra)


# -- the primitive's rules --------------------------------------------------------------------
def emit(record: jax.Array, name: str, extra: Optional[dict[str, str]], deferred: bool) -> None:
    """Report the ``[code, v1, v2, v3]`` ``record`` (traced) of the array ``name``."""
    bind(record, np.asarray(site_id(name, extra), record.dtype), deferred)


def bind(record: jax.Array, site: Any, deferred: bool) -> None:
    """Report a ``[code, v1, v2, v3]`` record (traced) of ``site`` (usually a constant)."""
    check_p.bind(record, site, deferred=deferred, order=next(_ORDER))


def entry(record: jax.Array, site: Any, dtype: Any) -> jax.Array:
    """``[code, v1, v2, v3, site]``, built from one-hot literals that XLA fuses into the select
    that records it (stacking scalars is a concatenate per check)."""
    hot = np.eye(RECORD_SIZE, dtype=dtype)
    out = jnp.asarray(site).astype(dtype) * hot[4]
    for k in range(4):
        out = out + record[k].astype(dtype) * hot[k]
    return out


_ORDER = itertools.count()  # numbers checks in the order they are traced (program order)


@check_p.def_effectful_abstract_eval
def _abstract_eval(record: Any, site: Any, **params: Any) -> tuple[list[Any], set[effects.Effect]]:
    return [], {EFFECT}


@check_p.def_impl
def _impl(record: Any, site: Any, *, deferred: bool, order: int) -> list[Any]:
    exc = exception(np.append(np.asarray(record), np.asarray(site, np.asarray(record).dtype)))
    if exc is not None:
        raise exc
    return []


def _batch(args: Any, dims: Any, **params: Any) -> tuple[list[Any], list[Any]]:
    # vmap: report the first batch member that failed.
    (record, site), (dim, site_dim) = args, dims
    size = record.shape[dim] if dim is not None else site.shape[site_dim]
    record = batching.bdim_at_front(record, dim, size)
    site = batching.bdim_at_front(site, site_dim, size)
    k = jnp.argmax(record[:, 0] != 0)
    check_p.bind(record[k], site[k], **params)
    return [], []


def _jvp(primals: Any, tangents: Any, **params: Any) -> tuple[list[Any], list[Any]]:
    check_p.bind(*primals, **params)
    return [], []


def _partial_eval_custom(saveable: Any, unks_in: Any, inst_in: Any, eqn: Any) -> Any:
    # remat: the check stays in the primal (known) computation and is not replayed.
    assert not any(unks_in), "jta_check depends on integer records only"
    return eqn, None, [], [], []


batching.primitive_batchers[check_p] = _batch
ad.primitive_jvps[check_p] = _jvp
pe.partial_eval_jaxpr_custom_rules[check_p] = _partial_eval_custom


def _fallback(record: jax.Array, site: jax.Array, *, deferred: bool, order: int) -> list[Any]:
    """The program was not functionalized: a value-returning op raises from the host."""
    if not deferred:
        callback = functools.partial(_callback, order)
        lax.cond(record[0] != 0, lambda: jax.debug.callback(callback, entry(record, site, record.dtype)),
                 lambda: None)
    return []


mlir.register_lowering(check_p, mlir.lower_fun(_fallback, multiple_results=True))


def _callback(order: int, record: Any) -> None:
    exc = exception(record)
    if exc is not None:
        # XLA runs unordered callbacks in any order, and several may fail in one run: the one
        # traced first is the first in program order, and is kept.
        if getattr(_RAISED, "exception", None) is None or order < _RAISED.order:
            _RAISED.exception, _RAISED.order = exc, order
        raise exc


_RAISED = threading.local()  # the first exception callbacks raised in compiled code (per thread)


def take_raised() -> Optional[Exception]:
    """The exception a callback raised in compiled code since the last call, if any."""
    exc = getattr(_RAISED, "exception", None)
    _RAISED.exception, _RAISED.order = None, -1
    return exc
