"""Ops whose results' sizes their inputs' values decide: ``Range``, ``DynamicPartition``,
``DynamicStitch``, ``RaggedTensorToTensor``, ``RaggedRange``, ``Bincount`` (``Where`` is in :mod:`._ops_linalg`).

A size is known while tracing (constants, shape arithmetic) or in an eager call (concrete
arguments); under ``jta.checked`` it is learned at run time (a record of code 506 makes it compile
for the size the run saw, and run again where they differ); under a bare ``jit`` it is refused
(code 405), naming ``jta.checked``. TensorFlow's checks of the values come with its texts, from
compiled code too.
"""

from __future__ import annotations

import weakref
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from .._delivery import value_ops
from ._messages import GraphError
from ._nodes import Node
from ._ops import OPS, as_numpy, is_static, learned_size, registrar, static_value, xp_of
from ._ops_checks import dims, invalid, known_now

_reg = registrar(OPS)


# The row counts learned for traced partitions, by the partitions' id (checked against a weak reference):
# the partitions of data and of its row numbers (the idiom with DynamicStitch, DynamicPartition's gradient)
# get the same counts, in every trace, also while jta.checked has learned only some of them.
_PARTITION_SIZES: dict[int, tuple[weakref.ref[Any], list[int]]] = {}


@_reg("DynamicPartition")
def _dynamic_partition(node: Node, args: list[Any]) -> list[Any]:
    """``data`` split by ``partitions`` (a prefix of its shape) into ``num_partitions`` outputs, rows in
    order: ``tf.dynamic_partition`` (the ids of a partitioned ``embedding_lookup``). The outputs' row
    counts depend on the partitions' values: known while tracing or in an eager call; under
    ``jta.checked`` learned at run time (:func:`learned_size`); refused under a bare ``jit``. An id
    outside ``[0, num_partitions)`` fails with TensorFlow's text (code 449)."""
    data, partitions = args
    count = int(node.attr("num_partitions"))
    rest = tuple(np.shape(data)[np.ndim(partitions):])
    known = known_now(partitions)
    if known is not None:
        flat = np.reshape(known, -1)
        bad = np.flatnonzero((flat < 0) | (flat >= count))
        if bad.size:
            at = ",".join(str(int(i)) for i in np.unravel_index(bad[0], np.shape(known)))
            GraphError.PARTITION_RANGE.raise_(name=node.name, op=node.op, index=at, value=int(flat[bad[0]]),
                                              count=count)
        rows = xp_of(data).reshape(data, (flat.size, *rest))
        return [as_numpy(rows[np.flatnonzero(flat == i)]) for i in range(count)]
    flat = jnp.reshape(partitions, -1)
    outside = (flat < 0) | (flat >= count)
    first = jnp.argmax(outside)
    value_ops.report(node.name, jnp.any(outside), GraphError.PARTITION_RANGE, first, flat[first], count,
                     extra={"op": node.op, "index_shape": dims(np.shape(partitions))})
    shared = _PARTITION_SIZES.get(id(partitions))
    if shared is not None and shared[0]() is partitions and len(shared[1]) == count:
        sizes = shared[1]  # (another DynamicPartition by the same partitions in this trace: the rows it learned)
    else:
        # under jta.checked each partition's rows are learned; before they are, the last has the rows the
        # others leave (all of them at first), so that every trace's partitions have data's rows together
        # (a gradient stitches them back and reshapes to data's shape)
        sizes = []
        for i in range(count):
            sizes.append(learned_size(node, jnp.sum(flat == i), "partitions (each partition's row count is an "
                                       "output's shape; jta.checked learns them at run time)",
                                       max(flat.size - sum(sizes), 0) if i == count - 1 else 0, flat.size, i))
        for key in [k for k, (ref, _) in _PARTITION_SIZES.items() if ref() is None]:
            del _PARTITION_SIZES[key]
        _PARTITION_SIZES[id(partitions)] = (weakref.ref(partitions), sizes)
    rows = jnp.reshape(jnp.asarray(data), (flat.size, *rest))
    return [rows[jnp.nonzero(flat == i, size=n)[0]] for i, n in enumerate(sizes)]


@_reg("DynamicStitch", "ParallelDynamicStitch")
def _dynamic_stitch(node: Node, args: list[Any]) -> list[Any]:
    """``merged[indices[m][i]] = data[m][i]``: the rows of ``data`` placed at ``indices``, ``max + 1``
    rows; where an index repeats the later row wins, as in TensorFlow, an index no row names gives
    zeros, and a negative one fails with TensorFlow's text (code 451). The row count is the indices' largest value: known while tracing or in an eager call; under
    ``jta.checked`` learned at run time; refused under a bare ``jit``. (It replaces the version in
    :mod:`._ops` that needed static indices.) ``jax.grad`` of it is TensorFlow's: every row gets its
    place's gradient, also a row a later one overwrote."""
    n = len(args) // 2
    indices, data = args[:n], args[n:]
    rest = tuple(np.shape(data[0])[np.ndim(indices[0]):])
    known = [known_now(i) for i in indices]
    values = [xp_of(d).reshape(d, (-1, *rest)) for d in data]
    stacked = xp_of(*data).concatenate(values)
    # a negative index is TensorFlow's error, naming its place in its own indices tensor (code 451)
    place = np.concatenate([np.arange(np.size(i)) for i in indices]).astype(np.int32)
    if all(k is not None for k in known):
        flat = np.concatenate([np.reshape(k, -1) for k in known if k is not None]).astype(np.int64)
        bad = np.flatnonzero(flat < 0)
        if bad.size:
            GraphError.STITCH_RANGE.raise_(name=node.name, op=node.op, index=int(place[bad[0]]))
        size = int(flat.max()) + 1 if flat.size else 0
        winner = np.full(size, -1, np.int64)
        winner[flat] = np.arange(flat.size)  # (numpy assigns a repeated index its last value)
    else:
        flat = jnp.concatenate([jnp.reshape(jnp.asarray(i), -1) for i in indices])
        value_ops.report(node.name, jnp.any(flat < 0), GraphError.STITCH_RANGE, jnp.asarray(place)[jnp.argmax(flat < 0)],
                         extra={"op": node.op})
        # (first guess: as many rows as indices, as where they are a permutation: the gradient of DynamicPartition)
        size = learned_size(node, jnp.max(flat, initial=-1) + 1,
                             "the indices (their largest, plus one, is the output's row count; jta.checked "
                             "learns it at run time)", flat.size)
        winner = jax.ops.segment_max(jnp.arange(flat.size), flat, num_segments=size)
    written = (winner >= 0).reshape((size,) + (1,) * len(rest))
    if not np.shape(stacked)[0]:
        return [as_numpy(xp_of(stacked).zeros((size, *rest), stacked.dtype))]
    if is_static(stacked) and isinstance(winner, np.ndarray):
        return [np.where(written, np.take(stacked, np.maximum(winner, 0), axis=0), 0).astype(stacked.dtype)]
    return [_stitched(jnp.asarray(stacked), jnp.asarray(flat), jnp.asarray(winner), jnp.asarray(written))]


@jax.custom_vjp
def _stitched(stacked: Any, flat: Any, winner: Any, written: Any) -> Any:
    """The rows of ``stacked`` that win their places (``winner``); TensorFlow's gradient
    (``_DynamicStitchGrads``) gives every row the gradient of its place, won or overwritten."""
    rows = jnp.take(stacked, jnp.maximum(winner, 0), axis=0)
    return jnp.where(written, rows, jnp.zeros_like(rows))


_stitched.defvjp(lambda stacked, flat, winner, written: (_stitched(stacked, flat, winner, written), flat),
                 lambda flat, g: (jnp.take(g, flat, axis=0), None, None, None))


def _size_of(node: Node, value: Any, what: str) -> int:
    """A dimension of an output: ``value`` (a scalar) known when the op runs, else learned by
    ``jta.checked`` (:func:`learned_size`), else refused."""
    known = known_now(value)
    return int(known) if known is not None else learned_size(node, value, what, 0)


@_reg("RaggedTensorToTensor")
def _ragged_tensor_to_tensor(node: Node, args: list[Any]) -> list[Any]:
    """``RaggedTensor.to_tensor``: the ragged tensor's ``values`` placed in a dense tensor filled with
    ``default_value``, each value at its row's position along each ragged dimension; ``shape`` (``-1``
    entries, or a scalar ``-1``: the natural size) pads or truncates. The row partitions are ``ROW_SPLITS``
    (one per ragged dimension) or ``FIRST_DIM_SIZE`` then ``VALUE_ROWIDS``. A dimension that ``shape``
    leaves open and the data decides (a ragged one: its longest row) is known while tracing or in an
    eager call, learned by ``jta.checked`` at run time, and refused under a bare ``jit``."""
    shape, values, default = args[:3]
    partitions = list(args[3:])
    kinds = [k.decode() if isinstance(k, bytes) else str(k) for k in node.attr("row_partition_types")]
    first = None
    if kinds and kinds[0] == "FIRST_DIM_SIZE":
        first, kinds, partitions = partitions[0], kinds[1:], partitions[1:]
    if not kinds or set(kinds) != {"VALUE_ROWIDS" if first is not None else "ROW_SPLITS"}:
        GraphError.UNSUPPORTED.raise_(items=f"  - node {node.name} (RaggedTensorToTensor): row_partition_types "
                                            f"{node.attr('row_partition_types')}; ROW_SPLITS, or FIRST_DIM_SIZE and "
                                            "VALUE_ROWIDS, run")
    ragged, inner = len(partitions), tuple(np.shape(values)[1:])
    wanted = np.reshape(static_value(node, shape, "the shape"), -1).astype(np.int64)
    if wanted.size == 1 and wanted[0] == -1:  # (a scalar -1: the shape of unknown rank, all natural)
        wanted = np.full(ragged + 1 + len(inner), -1, np.int64)
    if np.any(wanted < -1):
        GraphError.INVALID_ARGUMENT.raise_(node=node.name, op=node.op,
                                           error=f"Dimension {int(wanted[wanted < -1][0])} must be >= -1")
    dense = zip(wanted[ragged + 1:], inner, strict=False)
    if wanted.size != ragged + 1 + len(inner) or any(w not in (-1, d) for w, d in dense):
        GraphError.UNSUPPORTED.raise_(items=f"  - node {node.name} (RaggedTensorToTensor): shape {wanted.tolist()} "
                                            f"for ragged rank {ragged} and values of shape {np.shape(values)} (the "
                                            "dense dimensions cannot change)")
    known = [known_now(p) for p in partitions]
    xp = np if all(k is not None for k in known) else jnp
    if first is None:
        for k, p in zip(known, partitions, strict=True):
            _check_splits(node, k if k is not None else jnp.asarray(p))
    parts = [k if k is not None else jnp.asarray(p) for k, p in zip(known, partitions, strict=True)]
    if wanted[0] >= 0:
        dims = [int(wanted[0])]
    elif first is None:
        dims = [int(np.shape(parts[0])[0]) - 1]
    else:
        dims = [_size_of(node, first, "the first dimension (FIRST_DIM_SIZE)")]
    # each level's items (the elements of the rows, ..., values' rows): their positions in the output
    paths: list[Any] = []
    for k, p in enumerate(parts):
        if first is None:  # row_splits: the row of item j, and its place in that row
            count = int(np.shape(parts[k + 1])[0]) - 1 if k + 1 < ragged else int(np.shape(values)[0])
            j = xp.arange(count)
            parent = xp.searchsorted(p, j, side="right") - 1
            col = j - p[parent]
            natural = xp.max(p[1:] - p[:-1], initial=0)
        else:  # value_rowids (sorted): the row of item j, and how many items of that row come before it
            parent = p
            col = xp.arange(np.shape(p)[0]) - xp.searchsorted(p, p, side="left")
            natural = xp.max(col, initial=-1) + 1
        dims.append(int(wanted[k + 1]) if wanted[k + 1] >= 0 else _size_of(
            node, natural, f"ragged dimension {k + 1} (its longest row's length; jta.checked learns it at run time)"))
        paths = [*(path[parent] for path in paths), col] if paths else [parent, col]
    out_shape = (*dims, *inner)
    dtype = np.asarray(values).dtype if is_static(values) else values.dtype
    if xp is np and is_static(values) and is_static(default):
        out = np.array(np.broadcast_to(np.asarray(default, dtype), out_shape))
        keep = np.all([(p >= 0) & (p < d) for p, d in zip(paths, dims, strict=False)], axis=0)
        out[tuple(p[keep] for p in paths)] = np.asarray(values)[keep]
        return [out]
    fill = jnp.broadcast_to(jnp.asarray(default, dtype), out_shape)
    if 0 in out_shape:  # (nothing to place; JAX cannot differentiate a scatter into an empty dimension)
        return [fill]
    return [fill.at[tuple(jnp.asarray(p) for p in paths)].set(values, mode="drop")]


def _check_splits(node: Node, splits: Any) -> None:
    """TensorFlow's check of a ``ROW_SPLITS`` partition: the rows it places (each row's length, where it
    is not negative) add up to its last split (so splits start at 0 and do not decrease)."""
    xp = np if is_static(splits) else jnp
    lengths = splits[1:] - splits[:-1]
    placed = xp.sum(xp.maximum(lengths, 0)) if np.shape(splits)[0] > 1 else 0
    bad = np.shape(splits)[0] > 0 and placed != splits[-1]
    value_ops.report(node.name, bool(bad) if xp is np else bad, GraphError.RAGGED_SPLITS, extra={"op": node.op})


@_reg("Bincount", "DenseBincount")
def _bincount(node: Node, args: list[Any]) -> list[Any]:
    """``tf.math.bincount``: for each value in ``[0, size)``, how many entries of ``arr`` (each row of a
    matrix ``arr``) equal it, or the sum of their ``weights`` (empty: counts); ``binary_output``: whether
    any does. A negative value fails with TensorFlow's text (code 450); values past ``size`` are not
    counted. ``size`` (from ``arr``'s largest value unless ``minlength`` and ``maxlength`` fix it) is
    known when the op runs or learned by ``jta.checked`` (:func:`_size_of`)."""
    arr, size, weights = args
    known = known_now(arr)
    value_ops.report(node.name, bool(np.any(known < 0)) if known is not None else jnp.any(jnp.asarray(arr) < 0),
                     GraphError.BINCOUNT_NEGATIVE, extra={"op": node.op})
    dtype = np.dtype(node.attr("T"))
    size = _size_of(node, size, "the size (the output's length; jta.checked learns it at run time)")
    binary = bool(node.attr("binary_output", False))
    if is_static(arr) and is_static(weights):  # (static: a count that feeds shapes stays one)
        ids = np.asarray(arr)
        w = np.ones(ids.shape, dtype) if np.size(weights) == 0 or binary else np.asarray(weights, dtype)
        rows = ids if ids.ndim == 2 else ids.reshape(1, ids.size)  # (of no entries too: zeros)
        out = np.zeros((rows.shape[0], size), dtype)
        for r, (i, v) in enumerate(zip(rows, w.reshape(rows.shape), strict=True)):
            keep = (i >= 0) & (i < size)
            np.add.at(out[r], i[keep], v[keep])
        out = out if ids.ndim == 2 else out[0]
        return [(out > 0).astype(dtype) if binary else out]
    dtype = jax.dtypes.canonicalize_dtype(dtype)
    ids = jnp.asarray(arr)
    weights = jnp.ones(ids.shape, dtype) if np.size(weights) == 0 or binary else jnp.asarray(weights, dtype)
    if ids.ndim == 2:  # (DenseBincount of a batch: a row of counts per row)
        offset = jnp.where((ids >= 0) & (ids < size), ids + size * jnp.arange(ids.shape[0])[:, None], -1)
        out = jax.ops.segment_sum(weights.reshape(-1), offset.reshape(-1), ids.shape[0] * size).reshape(-1, size)
    else:
        out = jax.ops.segment_sum(weights.reshape(-1), ids.reshape(-1), size)
    return [(out > 0).astype(dtype) if binary else out]


@_reg("Range")
def _range(node: Node, args: list[Any]) -> list[Any]:
    """``tf.range``, with TensorFlow's checks. Its length is its shape: static values, or under
    ``jta.checked`` an integer range of a static ``delta`` whose length the run decides (learned, as
    ``Where``'s count is)."""
    start, limit, delta = args
    first, last, step = (known_now(a) for a in args)
    if step is None or (first is None or last is None) and not jnp.issubdtype(jnp.result_type(start), jnp.integer):
        static_value(node, delta if step is None else start if first is None else limit, "start, limit and delta")
        raise AssertionError  # unreachable: static_value raised (the value is traced)
    step = step.item()
    if step == 0:
        invalid(node, f"Requires delta != 0: {_number(step)}")
    check = GraphError.RANGE_UP if step > 0 else GraphError.RANGE_DOWN
    if first is not None and last is not None:
        if (first > last) if step > 0 else (first < last):
            check.raise_(name=node.name, op=node.op, start=_number(first.item()), limit=_number(last.item()))
        return [np.arange(first.item(), last.item(), step).astype(node.attr("Tidx", first.dtype))]
    first, last = jnp.asarray(start), jnp.asarray(limit)
    count = jnp.maximum((last - first + step - np.sign(step)) // step, 0)
    rows = learned_size(node, count, "start and limit (the number of elements is the result's shape; jta.checked "
                                     "learns it at run time)", 0)
    value_ops.report(node.name, first > last if step > 0 else first < last, check, first, last, extra={"op": node.op})
    dtype = jax.dtypes.canonicalize_dtype(node.attr("Tidx", first.dtype))
    return [(first + step * jnp.arange(rows)).astype(dtype)]


def _number(v: Any) -> str:
    """A number as TensorFlow's messages write it (``5``, ``0.5``)."""
    return f"{v:g}" if isinstance(v, float) else str(v)


@_reg("Unique", "UniqueV2", "UniqueWithCounts", "UniqueWithCountsV2")
def _unique(node: Node, args: list[Any]) -> list[Any]:
    """``tf.unique`` (``V2``: of the slices along ``axis``): the distinct entries ``y`` in the order of
    their first occurrence, ``idx`` mapping each entry to its place in ``y``, and (``WithCounts``) how
    often each occurs. As in TensorFlow, ``-0.0`` equals ``0.0`` and each NaN is distinct. ``y``'s length
    is known when the op runs, learned by ``jta.checked``, refused under a bare ``jit``."""
    x, axis = args[0], (args[1] if len(args) > 1 else np.zeros(0, np.int64))
    rank, where = np.ndim(x), np.reshape(static_value(node, axis, "axis"), -1)
    a = int(where[0]) if where.size else 0
    for bad, text in ((where.size > 1, "axis does not support input tensors larger than 1 elements"),
                      (where.size == 0 and rank != 1, "unique expects a 1D vector."),
                      (not -rank <= a < rank, f"axis has to be between [0, {rank})")):
        if bad:
            invalid(node, text)
    known = known_now(x)
    xp: Any = np if known is not None else jnp  # (numpy keeps an eager call's 64-bit values without x64)
    moved = xp.moveaxis(xp.asarray(x if known is None else known), a % rank, 0)
    firsts, idx, count = _first_occurrences(xp, moved.reshape(moved.shape[0], int(np.prod(moved.shape[1:]))))
    size = int(count) if known is not None else learned_size(
        node, count, "x (the number of distinct entries is y's length; jta.checked learns it at run time)",
        moved.shape[0])
    dtype = np.dtype(node.attr("out_idx", np.dtype("int32")))
    dtype = dtype if xp is np else jax.dtypes.canonicalize_dtype(dtype)
    counts = (np.bincount(idx, minlength=size) if xp is np else jnp.zeros(size, dtype).at[idx].add(1, mode="drop"))
    outputs = [xp.moveaxis(moved[firsts[:size]], 0, a % rank), idx.astype(dtype), counts.astype(dtype)]
    return outputs[:3 if "Counts" in node.op else 2]


def _first_occurrences(xp: Any, rows: Any) -> tuple[Any, Any, Any]:
    """For ``rows`` (``n`` rows): the index of each distinct row's first occurrence, in increasing order
    (padded to ``n``), each row's rank among them, and their count."""
    n = rows.shape[0]
    if n == 0 or rows.shape[1] == 0:  # (no rows, or all rows empty: equal)
        return xp.zeros(n, np.int32), xp.zeros(n, np.int32), min(n, 1)
    keys = xp.where(rows == 0, xp.zeros_like(rows), rows)  # (-0.0 sorts, so groups, with 0.0)
    perm = xp.lexsort([keys[:, j] for j in reversed(range(rows.shape[1]))])  # (stable: a group's first is first)
    ordered = keys[perm]
    start = xp.concatenate([xp.ones(1, bool), xp.any(ordered[1:] != ordered[:-1], axis=1)])  # (NaN != NaN)
    group = xp.cumsum(start) - 1
    if xp is np:
        first = np.full(n, n)
        np.minimum.at(first, group, perm)
    else:
        first = jax.ops.segment_min(perm, group, num_segments=n)  # (a group no row has: the dtype's largest)
    rank = xp.zeros(n, np.int32)
    rank = _put(rank, xp.argsort(first), xp.arange(n, dtype=np.int32))
    return xp.sort(first), _put(xp.zeros(n, np.int32), perm, rank[group]), xp.sum(start)


def _put(a: Any, at: Any, values: Any) -> Any:
    """``a`` with ``a[at] = values`` (a copy, of numpy or JAX)."""
    if isinstance(a, np.ndarray):
        a[at] = values
        return a
    return a.at[at].set(values)


_INT64_MAX = float(np.iinfo(np.int64).max)


def _range_sizes(xp: Any, s: Any, lim: Any, d: Any, integer: bool) -> tuple[Any, Any]:
    """Each row's length as ``RaggedRange``'s kernel counts it (``divup(|limit - start|, |delta|)`` of
    integers, ``ceil(|(limit - start) / delta|)`` in the floats' own type; 0 for a range that runs away
    from its limit), and where a float count is past int64 (TensorFlow's error)."""
    empty = ((d > 0) & (lim < s)) | ((d < 0) & (lim > s)) | (d == 0)
    step = xp.where(d == 0, 1, d)
    if integer:
        size, huge = (xp.abs(lim - s) + xp.abs(step) - 1) // xp.abs(step), xp.zeros(np.shape(s), bool)
    else:
        size = xp.ceil(xp.abs((lim - s) / step))
        huge = ~empty & ~(size <= _INT64_MAX)  # (NaN too: the kernel's `size <= max` fails)
    count = np.int64 if xp is np else jax.dtypes.canonicalize_dtype(np.int64)
    return xp.where(empty | huge, 0, size).astype(count), huge


@_reg("RaggedRange")
def _ragged_range(node: Node, args: list[Any]) -> list[Any]:
    """``tf.ragged.range``: one row per (broadcast) ``starts[i], limits[i], deltas[i]``, as row splits and
    values. Each row's values are ``start``, then the previous value plus ``delta`` (the kernel adds, so a
    float row drifts as TensorFlow's does; an integer row is ``start + j * delta``). The values' length
    is the data's: known while tracing or in an eager call, learned by ``jta.checked`` at run time,
    refused under a bare ``jit`` (``Bidirectional`` Keras layers reverse ragged rows with it)."""
    names = ("starts", "limits", "deltas")
    for name, a in zip(names, args, strict=True):
        if np.ndim(a) > 1:
            invalid(node, f"{name} must be a scalar or vector")
    lengths = {np.shape(a)[0] for a in args if np.ndim(a) == 1}
    if len(lengths) > 1:
        invalid(node, "starts, limits, and deltas must have the same shape")
    rows = lengths.pop() if lengths else 1
    dtype, splits_dtype = np.dtype(node.attr("T")), np.dtype(node.attr("Tsplits", np.dtype("int64")))
    integer = np.issubdtype(dtype, np.integer)
    huge_text = f"Requires ((limit - start) / delta) <= {np.iinfo(np.int64).max}"
    known = [known_now(a) for a in args]
    if all(k is not None for k in known):
        s, lim, d = (np.broadcast_to(np.asarray(k, dtype), (rows,)) for k in known)
        if np.any(d == 0):
            invalid(node, "Requires delta != 0")
        sizes, huge = _range_sizes(np, s, lim, d, integer)
        if np.any(huge):
            invalid(node, huge_text)
        splits = np.concatenate([[0], np.cumsum(sizes)]).astype(splits_dtype)
        if integer:
            values = [s[i] + np.arange(n, dtype=dtype) * d[i] for i, n in enumerate(sizes)]
        else:  # (np.add.accumulate adds in order, as the kernel's `value += delta`)
            values = [np.add.accumulate(np.concatenate([s[i:i + 1], np.full(max(n - 1, 0), d[i], dtype)]))[:n]
                      for i, n in enumerate(sizes)]
        return [splits, np.concatenate([np.zeros(0, dtype), *values]).astype(dtype)]
    jdtype = jax.dtypes.canonicalize_dtype(dtype)
    s, lim, d = (jnp.broadcast_to(jnp.asarray(a, jdtype), (rows,)) for a in args)
    value_ops.report(node.name, jnp.any(d == 0), GraphError.INVALID_ARGUMENT,
                     extra={"node": node.name, "op": node.op, "error": "Requires delta != 0"})
    sizes, huge = _range_sizes(jnp, s, lim, d, integer)
    value_ops.report(node.name, jnp.any(huge) & ~jnp.any(d == 0), GraphError.INVALID_ARGUMENT,
                     extra={"node": node.name, "op": node.op, "error": huge_text})
    splits = jnp.concatenate([jnp.zeros(1, sizes.dtype), jnp.cumsum(sizes)])
    total = learned_size(node, splits[-1], "starts, limits and deltas (the number of values is the result's shape; "
                                           "jta.checked learns it at run time)", 0)
    splits = splits.astype(jax.dtypes.canonicalize_dtype(splits_dtype))
    if not total or not rows:
        return [splits, jnp.zeros(0, jdtype)]
    at = jnp.arange(total)
    row = jnp.clip(jnp.searchsorted(splits, at, side="right") - 1, 0, rows - 1)
    col = (at - splits[row]).astype(jdtype)
    if integer:
        return [splits, s[row] + col * d[row]]

    def step(previous: Any, item: tuple[Any, Any, Any]) -> tuple[Any, Any]:
        first, start, delta = item  # (a row's first value is its start; the next ones add delta in order)
        value = jnp.where(first, start, previous + delta)
        return value, value

    _, values = jax.lax.scan(step, jnp.zeros((), jdtype), (col == 0, s[row], d[row]))
    return [splits, values]
