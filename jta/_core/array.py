"""The TensorArray data structure: pytree leaves, static metadata, and the two storage forms.

Leaves (``None`` where unused):

* ``data``: the elements. **Dense** form (element shape fully known): one buffer
  ``[capacity, *element_shape]``, indexable at traced indices. **Slots** form (element shape not
  fully known, e.g. ragged ``infer_shape=False`` arrays): a tuple with one array (or ``None``) per
  slot, whose per-slot flags and shapes are static (``ArrayMeta.slots``); indices must be Python
  ints. With ``infer_shape`` the first write fixes the element shape and the array turns dense.
* ``flags``: one ``int32`` bitfield per slot (``jta._records.records``), dense form with checks on.
* ``traced_size``: the logical size when it changes at run time (a ``dynamic_size`` array with a
  static ``capacity``, grown at traced indices); otherwise the size is static metadata.
* ``error``: the ``int32[4]`` error record (``jta._records.records``); ``None`` with ``checks=False``.
* ``flow``: TensorFlow's flow scalar, kept for API parity.

Sizes, one name each: ``static_size`` (metadata, when known while tracing), ``traced_size``
(the leaf), :func:`logical_size` (whichever applies), ``capacity`` (allocated slots) and
``marked_size`` (TensorFlow's name: the size a gradient array's ``concat`` uses, recorded by
the forward ``split``).
"""

from __future__ import annotations

import dataclasses
import itertools
from typing import Any, Optional, TypeVar, Union

import jax
import jax.numpy as jnp
import numpy as np
from jax.tree_util import GetAttrKey

from .._records import records
from .._records.catalogue import Error
from .._records.primitives import emit
from . import shapes
from .inputs import static_int
from .memory import check_buffer

__all__ = ["ArrayMeta", "ArrayData", "ArrayT", "become", "empty", "logical_size", "known_size", "require_static_size", "same_array"]

_LEAVES = ("_data", "_flags", "_traced_size", "_record", "_flow")


@dataclasses.dataclass(frozen=True)
class ArrayMeta:
    """Static (aux) data of a TensorArray: everything that is not a leaf."""

    dtype: np.dtype
    element_shape: shapes.Shape
    dynamic_size: bool
    clear_after_read: bool
    infer_shape: bool
    name: str
    static_size: Optional[int]  # the logical size; None when it lives in the ``traced_size`` leaf
    capacity: Optional[int]  # jta: static slot budget allowing traced growth
    is_accumulator: bool = False  # a gradient accumulator: writes add up, reads past the size grow it
    marked_size: int = -1
    closed: bool = False
    checks: bool = True
    slots: Optional[tuple[tuple[int, shapes.Shape], ...]] = None  # slots form: (bits, shape) per slot
    # TF's Python layer merges the shape of an empty unstack/scatter into its ``element_shape``,
    # which the kernel never sees (it reads unwritten slots with its own): set only then.
    python_shape: shapes.Shape = None
    # jta.checked's number for a dynamic_size array created without capacity= (jta._core.capacities)
    plan: Optional[int] = None

    def __repr__(self) -> str:
        # JAX prints this when a loop's carry changes structure (scan, fori_loop, while_loop,
        # cond): say which static part a loop body may not change, and what to do instead.
        size = f"size={self.static_size}" if self.static_size is not None else f"capacity={self.capacity}"
        parts = [f"TensorArray {self.name!r}", f"dtype={np.dtype(self.dtype).name}",
                 f"element_shape={shapes.debug_str(self.element_shape)}", size]
        parts += [k for k in ("dynamic_size", "is_accumulator", "closed") if getattr(self, k)]
        if self.marked_size >= 0:
            parts.append(f"split to size {self.marked_size}")
        if not self.checks:
            parts.append("checks=False")
        if self.slots is not None:  # the written ones: a large array has thousands of slots
            written = [f"{k}: {shapes.debug_str(shape)}" for k, (_, shape) in enumerate(self.slots) if shape is not None]
            shown = ", ".join(written[:8]) + (", ..." if len(written) > 8 else "")
            parts.append(f"{len(self.slots)} slots, {len(written)} written {{{shown}}}")
        hints = [hint for applies, hint in (
            (self.closed, _HINT_CLOSED),
            (self.marked_size >= 0, _HINT_SPLIT),
            (self.slots is not None, _HINT_SLOTS),
            (self.dynamic_size and self.capacity is None, _HINT_DYNAMIC),
        ) if applies]
        return f"ArrayMeta({', '.join(parts)})" + "".join(f"\n    [{h}]" for h in hints)


_HINT_CLOSED = ("closed: close() inside a loop body changes the array's static structure; close it "
                "after the loop")
_HINT_SPLIT = ("split: split() records the size its gradient's concat uses in the array's static structure, "
               "which both branches of a cond and a loop's carry must keep; split the array before the "
               "cond or loop (or in every branch)")
_HINT_SLOTS = ("element shape not fully defined: each write changes the array's static structure, which "
               "a loop carry must keep; pass a full element_shape= when creating the array")
_HINT_DYNAMIC = ("dynamic_size without capacity: the size is static, so writing past the end inside a "
                 "loop body changes the array's structure; pass capacity=N (a static bound) when "
                 "creating the array")


ArrayT = TypeVar("ArrayT", bound="ArrayData")  # a function returns the class it was given


class ArrayData:
    """Leaves and metadata of a TensorArray; :class:`jta.TensorArray` adds TensorFlow's API."""

    __slots__ = (*_LEAVES, "_meta")
    _data: Any
    _flags: Optional[jax.Array]
    _traced_size: Optional[jax.Array]
    _record: Optional[jax.Array]
    _flow: jax.Array
    _meta: ArrayMeta

    # -- pytree (no validation here: JAX rebuilds arrays with placeholder leaves) --------------
    def tree_flatten_with_keys(self) -> tuple[list[tuple[Any, Any]], ArrayMeta]:
        return [(GetAttrKey(k[1:]), getattr(self, k)) for k in _LEAVES], self._meta

    def tree_flatten(self) -> tuple[tuple[Any, ...], ArrayMeta]:
        return tuple(getattr(self, k) for k in _LEAVES), self._meta

    @classmethod
    def tree_unflatten(cls, meta: ArrayMeta, leaves: Any) -> Any:
        self = object.__new__(cls)
        for k, leaf in zip(_LEAVES, leaves, strict=True):
            object.__setattr__(self, k, leaf)
        object.__setattr__(self, "_meta", meta)
        return self

    def replace(self: ArrayT, *, data: Any = ..., flags: Any = ..., traced_size: Any = ..., record: Any = ...,
                flow: Any = ..., **meta: Any) -> ArrayT:
        """A copy with the given leaves and metadata fields replaced (same class)."""
        leaves: dict[str, Any] = dict(zip(_LEAVES, self.tree_flatten()[0], strict=True))
        for key, value in (("_data", data), ("_flags", flags), ("_traced_size", traced_size),
                           ("_record", record), ("_flow", flow)):
            if value is not ...:
                leaves[key] = value
        new_meta = dataclasses.replace(self._meta, **meta) if meta else self._meta
        return type(self).tree_unflatten(new_meta, tuple(leaves.values()))

    # -- what every layer may ask -----------------------------------------------------------
    @property
    def dtype(self) -> np.dtype:
        """The element dtype (JAX's canonical dtype)."""
        return self._meta.dtype

    @property
    def element_shape(self) -> shapes.Shape:
        """The (partial) element shape: a tuple with ``None`` for unknown dims, or ``None``."""
        m = self._meta
        return m.element_shape if m.python_shape is None else m.python_shape

    @property
    def dynamic_size(self) -> bool:
        """Whether writes past the end grow the array (frozen to ``False`` by gradient creation)."""
        return self._meta.dynamic_size

    @property
    def flow(self) -> jax.Array:
        """TensorFlow's flow scalar. JAX orders operations by dataflow, so jta gives the token
        another job: each new array's flow is a distinct number, which tells two arrays of the
        same name apart in a gradient registry."""
        return jnp.asarray(self._flow)

    @property
    def name(self) -> str:
        """The name in error messages; gradient arrays are named ``<forward>@<source>``."""
        return self._meta.name

    @property
    def handle(self) -> None:
        """Always ``None``: jta arrays are values, not resources."""
        return None

    @property
    def is_dense(self) -> bool:
        """Whether elements live in one ``[capacity, *element_shape]`` buffer (see module doc)."""
        return self._meta.slots is None

    @property
    def is_accumulator(self) -> bool:
        """Whether this is a gradient accumulator (``TensorArrayGradV3``): writes add up."""
        return self._meta.is_accumulator

    @property
    def capacity(self) -> int:
        """Number of allocated slots (static)."""
        slots = self._meta.slots
        return self._data.shape[0] if slots is None else len(slots)

    def error_fields(self) -> dict[str, str]:
        """Template fields of traced errors that come from static metadata."""
        shape = self._meta.element_shape or ()
        fields = {"rest": "".join(f",{d}" for d in shape[1:])}
        if self._meta.plan is not None and self._meta.capacity is not None:  # its buffer jta.checked grows
            fields["plan"] = str(self._meta.plan)
        return fields

    def check_open(self) -> None:
        if self._meta.closed:
            Error.CLOSED.raise_(name=self.name)


def logical_size(ta: ArrayData) -> Union[int, jax.Array]:
    """The logical size: a Python int when static, else the traced leaf."""
    size = ta._meta.static_size
    if size is not None:
        return size
    assert ta._traced_size is not None
    return ta._traced_size


def known_size(ta: ArrayData) -> Optional[int]:
    """The logical size when it is known while tracing, else ``None``."""
    return static_int(logical_size(ta))


def require_static_size(ta: ArrayData, what: str) -> int:
    size = known_size(ta)
    if size is None:
        Error.SIZE_ONLY_AT_RUN_TIME.raise_(name=ta.name, what=what)
    return size


_FLOWS = itertools.count(1)  # distinct flow values (exact in float32 up to 2**24)


def same_array(a: Any, b: Any) -> Optional[bool]:
    """Whether ``a`` and ``b`` come from one array (by their flows); ``None`` when traced."""
    if a._flow is b._flow:
        return True
    if not records.is_concrete(a._flow, b._flow):
        return None
    return bool(np.asarray(a._flow) == np.asarray(b._flow))


def empty(cls: type, meta: ArrayMeta, n: int, flow: Any = None) -> Any:
    """A fresh array of ``n`` unwritten slots (``capacity`` slots allocated when larger)."""
    cap = max(n, meta.capacity or 0)
    check_buffer(meta.name, "creating the array", cap, meta.element_shape, meta.dtype, meta.checks)
    error = records.no_error() if meta.checks else None
    # A NumPy leaf, so that it stays concrete inside ``jit`` until a loop carries it.
    flow = np.float32(next(_FLOWS) % 2**24) if flow is None else jnp.asarray(flow, jnp.float32)
    traced_size = jnp.asarray(n, jnp.int32) if meta.static_size is None else None
    if shapes.fully_defined(meta.element_shape):
        data = jnp.zeros((cap, *shapes.dims(meta.element_shape)), meta.dtype)
        flags = jnp.zeros((cap,), jnp.int32) if meta.checks else None
        return cls.tree_unflatten(meta, (data, flags, traced_size, error, flow))
    meta = dataclasses.replace(meta, slots=((0, None),) * n)
    return cls.tree_unflatten(meta, ((None,) * n, None, traced_size, error, flow))


def from_cotangent(ta: ArrayData) -> Any:
    """A cotangent array (from ``jax.vjp``/``jax.grad`` with respect to a TensorArray: its
    bookkeeping leaves are ``float0``) as the gradient of each element, without bookkeeping;
    any other array as it is."""
    if any(getattr(leaf, "dtype", None) == jax.dtypes.float0 for leaf in (ta._flags, ta._record)):
        return ta.replace(flags=None, record=None, checks=False)
    return ta


def raise_if_concrete(ta: ArrayData) -> Any:
    """Raise the recorded error now when the record is concrete (eager code), else report it
    as deferred (``jta._records.primitives``: it stays in ``ta`` unless the program is functionalized)."""
    if ta._record is None:
        return ta
    if records.is_concrete(ta._record, ta._flags):
        records.raise_if_error(ta.name, ta._record, ta._flags, ta.error_fields())
    else:
        emit(ta._record, ta.name, ta.error_fields(), deferred=True)
    return ta


def become(ta: ArrayData, other: ArrayData) -> None:
    """Give the (new, uninitialised) ``ta`` the leaves and metadata of ``other``: ``__init__``."""
    for key in ArrayData.__slots__:
        object.__setattr__(ta, key, getattr(other, key))
