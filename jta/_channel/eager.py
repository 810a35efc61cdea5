"""Eager loops and conditionals that hold a check raise TensorFlow's exception, not JAX's.

Outside ``jax.disable_jit()``, JAX runs a ``lax.scan``, ``lax.while_loop`` or ``lax.cond`` called
eagerly by compiling it (so does ``jax.vmap`` of one, even under ``disable_jit``). A check in its
body would then lower to a host callback, whose exception JAX reports as ``JaxRuntimeError``
with a traceback in its text: eager code would not get jta's class and text, and the error of
a mutator (a double write) would be lost with the array it made.

So when one of these primitives is applied eagerly and its body reports TensorArray errors
(its jaxpr carries ``ErrorEffect``), it runs functionalized instead: compiled once per set of
parameters, as JAX's own eager dispatch compiles it, threading one record through it, and the
record's first error in program order is raised when the call returns. Other uses of these
primitives (everything outside jta) keep JAX's implementation.
"""

from __future__ import annotations

import functools
from typing import Any

import jax
import numpy as np
from jax import lax
from jax._src import core
from jax._src import shard_map as shard_map_lib

from .functionalize import RULES, SiteTable, holds_checks, no_error
from .primitives import check_p, exception


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
        return rule(table, no_error(), *args, **dict(params))

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
    record, site = np.asarray(record), np.asarray(site)
    rows = record.reshape(-1, record.shape[-1])
    k = int(np.argmax(rows[:, 0] != 0))
    return check_p.impl(rows[k], np.broadcast_to(site, record.shape[:-1]).reshape(-1)[k], **params)


shard_map_lib.eager_rules[check_p] = _in_shard_map
