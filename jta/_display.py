"""Text and HTML views of TensorArrays, gradient registries and ``jta.raw_ops`` states.

Every view is built from what is *known*: static metadata always, leaf values only when they
are concrete. Inside ``jit``/``lax.scan``/``vmap`` the leaves are tracers and are shown as
``traced`` (never concretised), so printing an array while tracing is safe. Leaves that are not
arrays at all (``jax.tree.map(lambda x: x.shape, ta)``, ``jax.eval_shape`` outputs, dtypes,
a ``PartitionSpec`` per leaf...) are listed after ``leaves:`` in place of the slot strip::

    TensorArray<xs>(float32, size=5, element_shape=[2]) [leaves: data=(5, 2), flags=(5,), ...]

A view never raises: should formatting fail anyway, a one-line header from static metadata is
shown instead (:func:`_never_raises`).

The slot strip shows each slot's bookkeeping flags (see ``jta._records.records``)::

    TensorArray<xs>(float32, size=5, element_shape=[2]) [W W r . .]
      W written  r read  c read+cleared  . empty  ! slot error  - spare capacity

``jta.describe(x)`` gives the same view of a TensorArray, a ``raw_ops.State``, a gradient
registry ``{(name, source): accumulator}`` or any pytree holding TensorArrays; in Jupyter it
renders as HTML with the slots as a coloured strip.
"""

from __future__ import annotations

import functools
import html
from collections.abc import Callable
from typing import Any, Optional

import jax
import numpy as np
from jax.core import Tracer

from ._core import shapes
from ._core.array import ArrayData, ArrayMeta, from_cotangent
from ._records import records

__all__ = ["array_repr", "array_html", "state_repr", "state_html",
           "registry_repr", "registry_html"]

TRACED = "traced"
DELETED = "deleted"
UNKNOWN = "?"  # a leaf that is not an array (see :func:`leaves_note`)

# code -> (meaning, background colour, text colour)
CODES: dict[str, tuple[str, str, str]] = {
    "W": ("written", "#4caf50", "#ffffff"),
    "r": ("read", "#2196f3", "#ffffff"),
    "c": ("read+cleared", "#9e9e9e", "#ffffff"),
    ".": ("empty", "#ffffff", "#9e9e9e"),
    "!": ("slot error", "#e53935", "#ffffff"),
    "-": ("spare capacity", "#eeeeee", "#bdbdbd"),
}
LEGEND = "  ".join(f"{k} {v[0]}" for k, v in CODES.items())
MAX_SLOTS_TEXT = 64  # longer strips show the first and last slots and a count summary
MAX_SLOTS_HTML = 256
MAX_BATCH_ROWS = 3  # vmapped arrays: strips shown per batch member


# -- leaves ---------------------------------------------------------------------------------
_SHAPED = (jax.Array, Tracer, np.ndarray, np.generic, jax.ShapeDtypeStruct)  # leaves with a shape


def _is_array(x: Any) -> bool:
    """Whether ``x`` is a leaf the views can read: a JAX array (concrete, deleted or a tracer) or
    a NumPy value."""
    return isinstance(x, (jax.Array, Tracer, np.ndarray, np.generic))


def _value(x: Any) -> Any:
    """``x`` as a NumPy array if concrete; :data:`TRACED` for tracers, :data:`DELETED` for
    donated/deleted buffers, :data:`UNKNOWN` for what is not an array, ``None`` for ``None``."""
    if x is None:
        return None
    if not _is_array(x):
        return UNKNOWN
    if isinstance(x, Tracer):
        return TRACED
    if isinstance(x, jax.Array):
        try:
            if x.is_deleted():
                return DELETED
        except Exception:  # pragma: no cover - exotic array types
            pass
    try:
        return np.asarray(x)
    except Exception:  # e.g. not fully addressable across processes
        return TRACED


def _short(x: Any) -> str:
    """A few characters saying what a leaf is: ``float32[3,2]`` for arrays, tracers and
    ``jax.ShapeDtypeStruct`` leaves, ``(3, 2)`` for shape tuples, the repr (cut short) of anything else."""
    if isinstance(x, tuple):
        text = "(" + ", ".join(map(_short, x)) + ("," if len(x) == 1 else "") + ")"
    elif isinstance(x, np.dtype):
        text = x.name
    elif isinstance(x, _SHAPED):
        text = f"{getattr(x.dtype, 'name', x.dtype)}[{','.join(map(str, x.shape))}]"
    elif type(x).__repr__ is object.__repr__:
        text = f"<{type(x).__name__}>"  # no memory addresses
    else:
        text = repr(x)
    return text if len(text) <= 48 else text[:45] + "..."


def leaves_note(ta: Any) -> Optional[str]:
    """``None`` when ``ta`` holds its leaves as arrays (concrete, deleted or traced); otherwise
    what the leaves are, e.g. ``data=(5, 2), flags=(5,), record=(4,), flow=()`` for
    ``jax.tree.map(lambda x: x.shape, ta)``, ``data=float32[5,2], ...`` for ``jax.eval_shape``."""
    leaves = [(key.name, leaf) for key, leaf in ta.tree_flatten_with_keys()[0]]
    data = ta._data
    parts = list(data) if not ta.is_dense and isinstance(data, tuple) else [data]
    readable = (all(p is None or _is_array(p) for p in parts) and (not ta.is_dense or _is_array(data))
                and all(leaf is None or _is_array(leaf) for _, leaf in leaves[1:]))
    if readable:
        return None
    return ", ".join(f"{name}={_short(leaf)}" for name, leaf in leaves if leaf is not None) or "all None"


def _is_deleted(ta: Any) -> bool:
    for leaf in jax.tree_util.tree_leaves(ta):
        if isinstance(leaf, jax.Array) and not isinstance(leaf, Tracer):
            try:
                if leaf.is_deleted():
                    return True
            except Exception:  # pragma: no cover
                pass
    return False


def _sharding_str(data: Any) -> Optional[str]:
    """The buffer's sharding when it spans several devices (concrete dense arrays only)."""
    if not isinstance(data, jax.Array) or isinstance(data, Tracer):
        return None
    try:
        sharding = data.sharding
        n = len(sharding.device_set)
    except Exception:  # pragma: no cover
        return None
    if n <= 1:
        return None
    spec = getattr(sharding, "spec", None)
    what = str(spec) if spec is not None else type(sharding).__name__
    return f"sharded {what} over {n} devices"


# -- slots ----------------------------------------------------------------------------------
def _code(bits: int, clears: bool) -> str:
    if bits & records.ERROR_FLAGS:
        return "!"
    if bits & records.READ:
        return "c" if clears else "r"
    if bits & records.WRITTEN:
        return "W"
    return "."


def _size_of(ta: Any) -> Any:
    """The logical size: an int, a NumPy array (batched), or :data:`TRACED`/:data:`DELETED`."""
    if ta._meta.static_size is not None:
        return ta._meta.static_size
    v = _value(ta._traced_size)
    if isinstance(v, np.ndarray):
        return int(v) if v.ndim == 0 else v
    return v


def slot_rows(ta: Any) -> Any:
    """Per-slot codes: a list of strings (one per batch member; one string if unbatched),
    :data:`TRACED`, :data:`DELETED`, or ``None`` when slots are not tracked (``checks=False``)."""
    m = ta._meta
    clears = bool(m.clear_after_read or m.is_accumulator)
    size = _size_of(ta)
    if m.slots is not None:  # slots form: the flags are static
        bits = np.asarray([f for f, _ in m.slots], np.int64)[None]
    else:
        if ta._flags is None:
            return None
        v = _value(ta._flags)
        if not isinstance(v, np.ndarray):
            return v
        bits = v.reshape(-1, v.shape[-1]) if v.ndim else v.reshape(1, 1)
    if isinstance(size, (int, np.ndarray)) and np.size(size) in (1, bits.shape[0]):
        sizes = np.broadcast_to(np.asarray(size).reshape(-1), (bits.shape[0],))
    else:
        sizes = np.full((bits.shape[0],), bits.shape[1])
    rows = []
    for b, n in zip(bits, sizes, strict=True):
        row = "".join(_code(int(f), clears) if (k < n or f) else "-" for k, f in enumerate(b))
        rows.append(row)
    return rows


def _strip_text(row: str) -> str:
    if len(row) <= MAX_SLOTS_TEXT:
        return "[" + " ".join(row) + "]"
    head, tail = row[:40], row[-16:]
    counts = ", ".join(f"{CODES[k][0]} {row.count(k)}" for k in CODES if row.count(k))
    return "[" + " ".join(head) + " ... " + " ".join(tail) + f"] ({counts})"


def _capacity_and_batch(ta: Any) -> tuple[Optional[int], tuple[int, ...]]:
    """Slot count and leading batch dims (arrays returned by ``vmap`` carry batched leaves), read
    from the buffer's shape (also a ``ShapeDtypeStruct``'s); capacity ``None`` when not known."""
    m = ta._meta
    if not ta.is_dense:
        return len(m.slots or ()), ()
    data = ta._data
    if not isinstance(data, _SHAPED):
        return None, ()
    k = len(data.shape) - len(m.element_shape or ()) - 1
    if k < 0:
        return None, ()
    return int(data.shape[k]), tuple(int(d) for d in data.shape[:k])


def plural(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


def _header(ta: Any) -> str:
    m = ta._meta
    size = _size_of(ta)
    size_s = str(size) if isinstance(size, (int, str)) else np.array2string(np.asarray(size), separator=",")
    parts = [m.dtype.name, f"size={size_s}", f"element_shape={shapes.debug_str(m.element_shape)}"]
    capacity, batch = _capacity_and_batch(ta)
    if capacity is not None and not (isinstance(size, int) and capacity == size):  # size may be batched
        parts.append(f"capacity={capacity}")
    if batch:
        parts.append(f"batch={batch}")
    parts += [flag for flag, on in (("grad", m.is_accumulator), ("dynamic", m.dynamic_size), ("closed", m.closed),
                                    ("checks=False", not m.checks), ("ragged", m.slots is not None)) if on]
    if not m.clear_after_read and not m.is_accumulator:  # only the non-default value is worth showing
        parts.append("clear_after_read=False")
    sharding = _sharding_str(ta._data) if ta.is_dense else None
    if sharding:
        parts.append(sharding)
    return f"TensorArray<{m.name}>(" + ", ".join(parts) + ")"


def _error_text(ta: Any) -> Optional[str]:
    """The recorded error as ``Class: text``; :data:`TRACED` when not concrete; else ``None``."""
    if ta._record is None:
        return None
    error = _value(ta._record)
    flags = None if ta._flags is None else _value(ta._flags)
    if isinstance(error, str) or isinstance(flags, str):
        return error if isinstance(error, str) else flags
    exc = records.make_exception(ta.name, error, flags, ta.error_fields())
    return None if exc is None else f"{type(exc).__name__}: {exc}"


def _strip_lines(ta: Any) -> tuple[str, list[str]]:
    """(text appended to the header line, extra lines for batched arrays)."""
    note = leaves_note(ta)
    if note is not None:
        return f" [leaves: {note}]", []
    if _is_deleted(ta):
        return " [deleted: buffers were donated or freed]", []
    rows = slot_rows(ta)
    if rows is None:
        return " [slots not tracked: checks=False]", []
    if isinstance(rows, str):
        return f" [{rows}]", []
    if len(rows) == 1:
        return " " + _strip_text(rows[0]), []
    extra = [f"  batch[{k}] {_strip_text(r)}" for k, r in enumerate(rows[:MAX_BATCH_ROWS])]
    if len(rows) > MAX_BATCH_ROWS:
        extra.append(f"  ... ({len(rows) - MAX_BATCH_ROWS} more batch members)")
    return f" (batch of {len(rows)})", extra


def array_line(ta: Any, indent: str = "") -> list[str]:
    """The lines describing one array, without the legend."""
    strip, extra = _strip_lines(ta)
    lines = [indent + _header(ta) + strip] + [indent + e for e in extra]
    if _readable(ta):
        err = _error_text(ta)
        if err is not None and err != TRACED:
            lines.append(f"{indent}  error: {err}")
    return lines


def _readable(ta: Any) -> bool:
    """Whether the leaves are arrays that still exist (they may be traced)."""
    return leaves_note(ta) is None and not _is_deleted(ta)


def _wants_legend(ta: Any) -> bool:
    return _readable(ta) and isinstance(slot_rows(ta), list)


# -- the last resort ------------------------------------------------------------------------
def _fallback_line(x: Any, exc: Exception) -> str:
    """One line from static metadata, for when formatting ``x`` failed unexpectedly."""
    meta = getattr(x, "_meta", None)
    if isinstance(meta, ArrayMeta):
        size = "" if meta.static_size is None else f"size={meta.static_size}, "
        what = (f"TensorArray<{meta.name}>({getattr(meta.dtype, 'name', meta.dtype)}, {size}"
                f"element_shape={shapes.debug_str(meta.element_shape)})")
    else:
        what = type(x).__name__
    return f"{what} [not shown: {type(exc).__name__} while formatting]"


def _never_raises(as_html: bool) -> Callable[[Callable[[Any], str]], Callable[[Any], str]]:
    """A repr must never raise: the known odd inputs (non-array leaves, batches, tracers, donated
    buffers) are handled explicitly above; anything else falls back to :func:`_fallback_line`."""
    def decorate(view: Callable[[Any], str]) -> Callable[[Any], str]:
        @functools.wraps(view)
        def safe(x: Any) -> str:
            try:
                return view(x)
            except Exception as exc:  # the last resort
                line = _fallback_line(x, exc)
                return wrap(f"<code>{html.escape(line)}</code>") if as_html else line
        return safe
    return decorate


@_never_raises(as_html=False)
def array_repr(ta: Any) -> str:
    """``repr(TensorArray)``: header, slot strip, recorded error, legend."""
    ta = from_cotangent(ta)  # a cotangent array shows the gradient it holds
    lines = array_line(ta)
    if _wants_legend(ta):
        lines.append("  " + LEGEND)
    return "\n".join(lines)


# -- registries and states ------------------------------------------------------------------
def _registry_lines(grads: dict, forward_names: Any = ()) -> list[str]:
    sources = sorted({s for _, s in grads}, key=str)
    lines = []
    by_forward: dict[str, list[tuple[str, Any]]] = {}
    for (name, source), g in grads.items():
        by_forward.setdefault(name, []).append((source, g))
    for name in list(forward_names) + [n for n in by_forward if n not in forward_names]:
        for source, g in by_forward.get(name, []):
            lines.append(f"  ({name!r}, {source!r}):")
            lines += array_line(g, indent="    ")
    summary = ", ".join(f"{s!r} ({plural(sum(1 for _, t in grads if t == s), 'array')})" for s in sources)
    return ([f"  sources: {summary}"] if sources else []) + lines


@_never_raises(as_html=False)
def registry_repr(grads: dict) -> str:
    """A gradient registry ``{(forward name, source): accumulator}``."""
    lines = [f"Registry({plural(len(grads), 'gradient accumulator')})"] + _registry_lines(grads)
    if any(_wants_legend(g) for g in grads.values()):
        lines.append("  " + LEGEND)
    return "\n".join(lines)


@_never_raises(as_html=False)
def state_repr(state: Any) -> str:
    """``repr(raw_ops.State)``: its arrays, then its accumulators grouped by forward array."""
    lines = [f"State({plural(len(state.arrays), 'array')}, {plural(len(state.grads), 'gradient accumulator')}, "
             f"counter={state.counter})"]
    for handle, ta in state.arrays.items():
        sources = [s for (n, s) in state.grads if n == handle]
        lines.append(f"  {handle!r}" + (f" (accumulators for sources {', '.join(map(repr, sources))})"
                                        if sources else ""))
        lines += array_line(ta, indent="    ")
    if state.grads:
        lines.append("  gradient accumulators:")
        lines += ["  " + line for line in _registry_lines(state.grads, list(state.arrays))]
    if any(_wants_legend(t) for t in [*state.arrays.values(), *state.grads.values()]):
        lines.append("  " + LEGEND)
    return "\n".join(lines)


# -- HTML -----------------------------------------------------------------------------------
_BOX = ("display:inline-block;width:1.4em;height:1.4em;line-height:1.4em;margin:0 1px 1px 0;"
        "text-align:center;font-size:0.8em;border:1px solid #616161;border-radius:2px;"
        "background:{bg};color:{fg}")


def _box(code: str, title: str) -> str:
    _, bg, fg = CODES.get(code, ("", "#ffffff", "#000000"))
    return f'<span title="{html.escape(title)}" style="{_BOX.format(bg=bg, fg=fg)}">{html.escape(code)}</span>'


def _strip_html(row: str) -> str:
    shown = list(enumerate(row))
    cut = None
    if len(row) > MAX_SLOTS_HTML:
        cut = len(row) - MAX_SLOTS_HTML
        shown = shown[:192] + shown[-64:]
    boxes = []
    for n, (k, code) in enumerate(shown):
        if cut and n == 192:
            boxes.append(f'<span style="margin:0 4px">… {cut} slots …</span>')
        boxes.append(_box(code, f"slot {k}: {CODES.get(code, (code,))[0]}"))
    return '<div class="jta-strip" style="display:flex;flex-wrap:wrap;align-items:center">' + "".join(boxes) + "</div>"


def _legend_html() -> str:
    return ('<div class="jta-legend" style="font-size:0.8em;color:#616161;margin-top:2px">'
            + " ".join(_box(k, v[0]) + f"&nbsp;{html.escape(v[0])}&nbsp;" for k, v in CODES.items())
            + "</div>")


def _array_block_html(ta: Any) -> str:
    parts = [f"<div><code>{html.escape(_header(ta))}</code></div>"]
    note = leaves_note(ta)
    if note is not None:
        parts.append(f"<div><i>leaves: {html.escape(note)}</i></div>")
        return "".join(parts)
    if _is_deleted(ta):
        parts.append("<div><i>deleted: buffers were donated or freed</i></div>")
        return "".join(parts)
    rows = slot_rows(ta)
    if rows is None:
        parts.append("<div><i>slots not tracked (checks=False)</i></div>")
    elif isinstance(rows, str):
        parts.append(f"<div><i>slots {html.escape(rows)}</i></div>")
    else:
        for k, row in enumerate(rows[:MAX_BATCH_ROWS]):
            label = f"<small>batch[{k}]</small>" if len(rows) > 1 else ""
            parts.append(label + _strip_html(row))
        if len(rows) > MAX_BATCH_ROWS:
            parts.append(f"<div><small>… {len(rows) - MAX_BATCH_ROWS} more batch members</small></div>")
    err = _error_text(ta)
    if err is not None and err != TRACED:
        parts.append(f'<div style="color:#c62828"><b>error:</b> {html.escape(err)}</div>')
    return "".join(parts)


def wrap(body: str) -> str:
    return f'<div class="jta-repr" style="font-family:monospace;margin:2px 0">{body}</div>'


@_never_raises(as_html=True)
def array_html(ta: Any) -> str:
    """``TensorArray._repr_html_``: the header and the slots as a coloured strip."""
    ta = from_cotangent(ta)
    legend = _legend_html() if _wants_legend(ta) else ""
    return wrap(_array_block_html(ta) + legend)


def _grads_html(grads: dict) -> str:
    rows = []
    for (name, source), g in grads.items():
        rows.append(f'<tr><td style="text-align:left"><code>{html.escape(repr(name))}</code></td>'
                    f'<td style="text-align:left"><code>{html.escape(repr(source))}</code></td>'
                    f'<td style="text-align:left">{_array_block_html(g)}</td></tr>')
    return ('<table><tr><th style="text-align:left">forward</th><th style="text-align:left">source</th>'
            '<th style="text-align:left">accumulator</th></tr>' + "".join(rows) + "</table>")


@_never_raises(as_html=True)
def registry_html(grads: dict) -> str:
    legend = _legend_html() if any(_wants_legend(g) for g in grads.values()) else ""
    return wrap(f"<div><b>Registry</b> ({plural(len(grads), 'gradient accumulator')})</div>" + _grads_html(grads) + legend)


@_never_raises(as_html=True)
def state_html(state: Any) -> str:
    rows = []
    for handle, ta in state.arrays.items():
        sources = ", ".join(repr(s) for (n, s) in state.grads if n == handle) or "—"
        rows.append(f'<tr><td style="text-align:left"><code>{html.escape(repr(handle))}</code></td>'
                    f'<td style="text-align:left">{_array_block_html(ta)}</td>'
                    f'<td style="text-align:left"><code>{html.escape(sources)}</code></td></tr>')
    body = (f"<div><b>State</b> ({plural(len(state.arrays), 'array')}, "
            f"{plural(len(state.grads), 'gradient accumulator')}, "
            f"counter={state.counter})</div>"
            '<table><tr><th style="text-align:left">handle</th><th style="text-align:left">array</th>'
            '<th style="text-align:left">accumulator sources</th></tr>' + "".join(rows) + "</table>")
    if state.grads:
        body += "<div><b>gradient accumulators</b></div>" + _grads_html(state.grads)
    everything = [*state.arrays.values(), *state.grads.values()]
    return wrap(body + (_legend_html() if any(_wants_legend(t) for t in everything) else ""))


def is_registry(x: Any) -> bool:
    """Whether ``x`` is a gradient registry ``{(forward name, source): accumulator}``."""
    return isinstance(x, dict) and bool(x) and all(
        isinstance(k, tuple) and len(k) == 2 and isinstance(v, ArrayData) for k, v in x.items())
