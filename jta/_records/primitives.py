"""The record format's two primitives: ``jta_record`` updates a record, ``jta_check`` reports one.

A record is an integer vector ``[code, v1, v2, v3]`` (int64 under x64): an
:class:`~jta._records.catalogue.Error` code (0: no error) and its traced fields. Ops update it
only through ``jta_record`` and ``jta_slot`` (``slots``; the first error wins,
:func:`first_error`), so a record's history is visible in a jaxpr as a chain of those
equations: the functionalizer proves from that chain that a check may move out of a loop
(``jta._delivery.hoisting``).

An op hands its record to ``jta_check(record, site, sites=..., deferred=...)``. The static half
of the error travels in the equation's params: ``sites`` is a tuple of :class:`Site` (the
array's name, its template fields, the user's source line) and the operand ``site`` indexes it.
Who runs the program decides what happens next (``jta._delivery``): :func:`jta.checkify` and
:func:`jta.checked` thread one record ``[code, v1, v2, v3, site]`` through it, the first error
in program order winning (``functionalize``); otherwise the primitive is lowered as it stands
(``callbacks``): a value op's check raises from a host callback, a mutator's lowers to nothing.

``jta_check`` carries an effect, so JAX's dead-code elimination keeps it even though it has no
outputs, and the effect is registered wherever JAX asks (control flow, custom derivatives,
remat, partial evaluation: the check stays with the primal computation under ``jax.grad``).
Defining primitives and an effect needs ``jax._src`` (as JAX's own ``checkify`` does), hence
the pinned JAX range in ``pyproject.toml``.
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import os
from typing import Any, Optional

import jax
import jax.numpy as jnp
import numpy as np
from jax._src import core, effects, source_info_util
from jax._src.interpreters import ad
from jax._src.interpreters import partial_eval as pe
from jax.interpreters import batching, mlir

from .catalogue import Message, learns, unsigned_bit

RECORD_SIZE = 5  # a functionalized record: code, three values, site


@dataclasses.dataclass(frozen=True)
class Site:
    """The static half of an error: the array's name, the template fields that come from its
    metadata, and the user's source line that ran the op (``""`` when unknown)."""

    name: str
    fields: tuple[tuple[str, str], ...] = ()
    where: str = ""

    def exception(self, code: int, values: Any) -> Exception:
        """The exception for a record's ``code`` and integer ``values``: TensorFlow's class and
        text, with a note (PEP 678) naming the array and the source line."""
        return noted(Message.by_code(code).from_record(self.name, values, dict(self.fields)), self.name, self.where)

    def to_json(self) -> list[Any]:
        return [self.name, [list(kv) for kv in self.fields], self.where]

    @classmethod
    def from_json(cls, data: list[Any]) -> Site:
        name, fields, where = data
        return cls(name, tuple((k, v) for k, v in fields), where)


def sites_to_bytes(sites: tuple[Site, ...]) -> bytes:
    return json.dumps([s.to_json() for s in sites]).encode()


def sites_from_bytes(data: bytes) -> tuple[Site, ...]:
    return tuple(Site.from_json(s) for s in json.loads(data.decode())) if data else ()


def exception(record: Any, sites: tuple[Site, ...]) -> Optional[Exception]:
    """The exception a concrete ``[..., code, v1, v2, v3, site]`` record describes (batched:
    the first member that failed, in row-major order), or ``None``."""
    row = first_failing_row(np.asarray(record).reshape(-1, RECORD_SIZE))
    if row is None:
        return None
    code, *values, site = (int(v) for v in row)
    return sites[site].exception(code, values)


def first_failing_row(rows: np.ndarray) -> Optional[np.ndarray]:
    """The first row (a batch member, row-major) of concrete ``rows`` whose code is set, or ``None``."""
    failed = np.nonzero(rows[:, 0])[0]
    return rows[failed[0]] if failed.size else None


_JTA_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # the package, not this subpackage


def noted(exc: Exception, name: str, where: Optional[str] = None) -> Exception:
    """``exc`` with the note (PEP 678) every TensorArray error carries, naming the array and the
    user's line (``where``; by default the innermost frame outside JAX and jta), unless it has
    one already; ``exc.jta_array`` is the array's name."""
    if getattr(exc, "jta_array", None) is None:
        exc.jta_array = name  # type: ignore[attr-defined]  # for code that reports it further (the importer)
    add_note = getattr(exc, "add_note", None)  # Python >= 3.11
    if add_note is None or getattr(exc, "__notes__", None):
        return exc
    where = user_line() if where is None else where
    if where:
        add_note(f"TensorArray {name!r}, at {where}")
    return exc


def user_line() -> str:
    """``file:line (function)`` of the innermost frame outside JAX and jta, or ``""``."""
    for frame in source_info_util.user_frames(source_info_util.current().traceback):
        if not os.path.abspath(frame.file_name).startswith(_JTA_DIR):
            return f"{frame.file_name}:{frame.start_line} ({frame.function_name})"
    return ""


# -- jta_record: the first error wins -----------------------------------------------------------
record_p = core.Primitive("jta_record")


def no_error(width: int = 4) -> jax.Array:
    """An empty record (``width`` 4: an array's ``[code, v1, v2, v3]``; :data:`RECORD_SIZE`: a
    functionalized one, with its site). Its integers are int64 under x64, so that a traced int64
    index is reported as it was given (TensorFlow's indices are int32, its sizes int64)."""
    return jnp.zeros((width,), jax.dtypes.canonicalize_dtype(np.int64))


def first_error(error: Any, bad: Any, entry: Any, xp: Any = jnp) -> Any:
    """The rule every record follows: ``entry`` where ``bad`` holds and ``error`` holds no error
    yet, else ``error`` (the first error wins). Rank-polymorphic: ``error``/``entry`` are
    ``[..., n]``, ``bad`` is ``[...]``. ``xp``: ``jax.numpy``, or ``numpy`` for records known
    while tracing."""
    return xp.where(((error[..., 0] == 0) & bad)[..., None], entry, error)


def learned_max(error: Any, bad: Any, entry: Any, xp: Any = jnp) -> Any:
    """:func:`first_error`, except that an ``entry`` to learn from (:data:`LEARNS`) also replaces a
    record of its own code word (and site, in a functionalized record) whose index (``v1``, with
    ``v3`` its high word) is smaller: the record keeps the largest write past a planned buffer,
    which is what the buffer needs."""
    same = error[..., 0] == entry[..., 0]
    if error.shape[-1] > 4:
        same = same & (error[..., 4] == entry[..., 4])
    larger = (entry[..., 3] > error[..., 3]) | ((entry[..., 3] == error[..., 3]) & (entry[..., 1] > error[..., 1]))
    take = bad & ((error[..., 0] == 0) | (same & larger & learns(entry[..., 0])))
    return xp.where(take[..., None], entry, error)


def packed(dtype: Any, width: int, *fields: Any) -> jax.Array:
    """``[*fields]`` padded with zeros to ``width``, built elementwise from one-hot constants:
    XLA fuses it into the select that records it, where stacking scalars is a concatenate per
    check. The constants are NumPy's, so they enter the program as literals (``jnp.eye`` would
    add an iota, a compare and a convert per field for XLA to fold, at compile time).

    ``fields[0]`` is a code (or a code word, copied from a record): a later field that holds a
    ``uint64`` past 2**63, which the signed record keeps as its bits, sets its bit of the code word
    (:func:`~jta._records.catalogue.code_word`), so that the text prints the value as given. A
    signed field, or a narrower unsigned one, is kept as it is."""
    hot = np.eye(width, dtype=dtype)
    out: Any = np.zeros((width,), dtype)
    for k, v in enumerate(fields):
        value = _as_integer(v, dtype)
        out = out + value.astype(dtype) * hot[k]
        if k and np.dtype(dtype).itemsize == 8 and value.dtype == np.uint64:  # its top bit reads as the sign
            top = value >> np.uint64(63)  # (NumPy for a known value: a literal)
            out = out + top.astype(dtype) * np.asarray(unsigned_bit(k - 1), dtype) * hot[0]
    return jnp.asarray(out)


def _as_integer(v: Any, dtype: Any) -> Any:
    """A field of :func:`packed`: NumPy for a Python or NumPy integer (a Python int in ``dtype``,
    or past int64 as a uint64), else a JAX value in its own dtype."""
    if isinstance(v, int) and np.dtype(dtype).itemsize == 8 and np.iinfo(np.int64).max < v < 2**64:
        return np.asarray(v, np.uint64)
    if isinstance(v, int):
        return np.asarray(v, dtype)
    if isinstance(v, np.integer):
        return np.asarray(v)
    return jnp.asarray(v)


def varying_alike(*operands: Any) -> tuple[Any, ...]:
    """Inside ``shard_map``, ``operands`` made device-varying alike, as JAX's own ops do."""
    varying = frozenset().union(*(core.typeof(x).mat.varying for x in operands))
    if not varying:
        return operands
    return tuple(core.pvary(x, tuple(varying - core.typeof(x).mat.varying)) for x in operands)


def merge(error: jax.Array, bad: Any, entry: jax.Array, learns: bool = False) -> jax.Array:
    """:func:`first_error` (:func:`learned_max` when the entry ``learns``) as the ``jta_record``
    primitive, whose chain the functionalizer reads."""
    return record_p.bind(*varying_alike(error, jnp.asarray(bad, bool), entry), learns=learns)


def merged(error: Any, bad: Any, entry: Any, *, learns: bool, xp: Any = jnp) -> Any:
    """What ``jta_record`` computes."""
    return (learned_max if learns else first_error)(error, bad, entry, xp)


def _merge_impl(error: Any, bad: Any, entry: Any, *, learns: bool) -> Any:
    return merged(error, bad, entry, learns=learns)


def _merge_batch(args: Any, dims: Any, *, learns: bool) -> tuple[Any, int]:
    size = next(a.shape[d] for a, d in zip(args, dims, strict=True) if d is not None)
    error, bad, entry = (batching.bdim_at_front(a, d, size) for a, d in zip(args, dims, strict=True))
    return record_p.bind(error, bad, entry, learns=learns), 0


record_p.def_impl(_merge_impl)
record_p.def_abstract_eval(lambda error, bad, entry, **_: error.update(weak_type=False))
mlir.register_lowering(record_p, mlir.lower_fun(_merge_impl, multiple_results=False))
batching.primitive_batchers[record_p] = _merge_batch
ad.defjvp_zero(record_p)  # integers: no tangent


# -- jta_check: report a record -----------------------------------------------------------------
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

_ORDER = itertools.count()  # numbers checks in the order they are traced (program order)


def emit(record: jax.Array, name: str, extra: Optional[dict[str, str]], deferred: bool) -> None:
    """Report the ``[code, v1, v2, v3]`` ``record`` (traced) of the array ``name``."""
    site = Site(name, tuple(sorted((extra or {}).items())), user_line())
    bind(record, np.asarray(0, record.dtype), (site,), deferred)


def bind(record: jax.Array, site: Any, sites: tuple[Site, ...], deferred: bool) -> None:
    """Report a ``[..., code, v1, v2, v3]`` record (traced) whose error is ``sites[site]``.
    A batched record (an array made by ``vmap``, returned from it) reports its first failing
    member."""
    record, site = first_failing(record, jnp.asarray(site))
    check_p.bind(record, site.astype(record.dtype), sites=sites, deferred=deferred, order=next(_ORDER))


def first_failing(record: jax.Array, site: jax.Array) -> tuple[jax.Array, jax.Array]:
    """``record[k]`` and ``site[k]`` for the first member ``k`` (row-major) of a batched record
    whose code is set (member 0 when none is); unbatched records as they are."""
    if record.ndim == 1:
        return record, site
    site = jnp.broadcast_to(site, record.shape[:-1]).reshape(-1)
    record = record.reshape(-1, record.shape[-1])
    k = jnp.argmax(record[:, 0] != 0)
    return record[k], site[k]


def entry(record: jax.Array, site: Any, dtype: Any) -> jax.Array:
    """``[code, v1, v2, v3, site]``: a functionalized record's entry."""
    return packed(dtype, RECORD_SIZE, *(record[k] for k in range(4)), site)


@check_p.def_effectful_abstract_eval
def _abstract_eval(record: Any, site: Any, **params: Any) -> tuple[list[Any], set[effects.Effect]]:
    return [], {EFFECT}


@check_p.def_impl
def _impl(record: Any, site: Any, *, sites: tuple[Site, ...], deferred: bool, order: int) -> list[Any]:
    exc = exception(np.append(np.asarray(record), np.asarray(site, np.asarray(record).dtype)), sites)
    if exc is not None:
        raise exc
    return []


def _batch(args: Any, dims: Any, **params: Any) -> tuple[list[Any], list[Any]]:
    # vmap: report the first batch member that failed.
    (record, site), (dim, site_dim) = args, dims
    size = record.shape[dim] if dim is not None else site.shape[site_dim]
    record, site = first_failing(batching.bdim_at_front(record, dim, size),
                                 batching.bdim_at_front(site, site_dim, size))
    check_p.bind(record, site, **params)
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
