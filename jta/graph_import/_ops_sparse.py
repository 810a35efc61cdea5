"""The sparse ops that TF2 code emits between dense inputs and outputs: ``tf.nn.embedding_lookup_sparse``
and ``safe_embedding_lookup_sparse`` (``SparseSegmentSum``/``Mean``/``SqrtN``, with ``num_segments``, their
gradient ops, ``SparseFillEmptyRows`` and its gradient, ``SparseReshape``), ``tf.sparse.to_dense``
(``SparseToDense``), ``sparse_dense_matmul``, ``reduce_sum``, ``softmax`` (with the ``SparseDenseCwise*``
ops of its gradient), ``reorder`` and ``add`` of a dense tensor.

A ``SparseTensor`` here is its three dense parts: ``indices`` (``[nnz, rank]``), ``values`` and
``dense_shape``. The ``dense_shape`` must be static (a ``Shape`` of a dense input, as ``tf.sparse.from_dense``
gives); ``nnz`` is a shape, so where the data decides it (``Where`` in ``from_dense``; here the empty rows
``SparseFillEmptyRows`` adds, the row count of a ``SparseSegment*`` without ``num_segments``) it is known
in an eager call, learned by ``jta.checked`` at run time and refused under a bare ``jit``, as ``Where``'s
count is (:mod:`._ops_sizes`). Bad indices fail with TensorFlow's texts, in its kernels' order of checks
(``sparse_to_dense_op.cc``, ``segment_reduction_ops_impl.h``, ``sparse_tensor_dense_matmul_op.cc``, ...),
from compiled code too (the texts with run-time values: :class:`._messages.GraphError`'s ``SPARSE_*``).
JAX's derivative of each op is TensorFlow's registered gradient (``sparse_grad.py``, ``math_grad.py``), so
``jax.grad`` goes through the forward ops; the gradient ops are here for train steps that hold them
(``SparseReorder``'s inverts a run-time permutation: :mod:`._ops`'s ``InvertPermutation``). ``SparseAdd``
of two sparse tensors (its entries' count is the data's, from a merge) is not here: it is refused as an
unsupported op.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from .._delivery import value_ops
from ._messages import GraphError
from ._nodes import Node
from ._ops import OPS, learned_size, learned_value, registrar, static_value, xp_of
from ._ops_checks import dims, invalid, invalid_where, known_or_traced

_reg = registrar(OPS)


def _int_array(x: Any) -> Any:
    """Indices as numpy when known now, else as a JAX array."""
    return known_or_traced(x)[0]


def _alike(*xs: Any) -> tuple[Any, ...]:
    """``xs`` all numpy (known now), else all JAX arrays (one of them traced), and their array module."""
    xp = xp_of(*xs)
    return (*(x if xp is np else jnp.asarray(x) for x in xs), xp)


def _shape(node: Node, shape: Any, what: str) -> tuple[int, ...]:
    return tuple(int(d) for d in np.reshape(static_value(node, shape, what), -1))


def _lex_steps(xp: Any, idx: Any) -> tuple[Any, Any]:
    """For each row of ``idx`` after the first: whether it sorts before the row above it (lexicographically)
    and whether it equals it."""
    diff = idx[1:] - idx[:-1]
    moved = diff != 0
    first = xp.argmax(moved, axis=1)
    step = xp.take_along_axis(diff, first[:, None], axis=1)[:, 0]
    return xp.any(moved, axis=1) & (step < 0), ~xp.any(moved, axis=1)


# -- SparseSegment{Sum,Mean,SqrtN}[WithNumSegments] and their gradients -----------------------------------
def _segment_checks(node: Node, idx: Any, seg: Any, rows: int, limit: int) -> None:
    """The checks of ``SparseSegmentReductionOpBase``'s loop, in its order: segment by segment, at its end
    the next id is larger (453) and this one is in ``[0, rows)`` (454), then each index of the segment is in
    ``[0, limit)`` (``Bad: indices[i] == v ...``)."""
    idx, seg, xp = _alike(idx, seg)
    n = seg.shape[0]
    ends = xp.concatenate([seg[:-1] != seg[1:], xp.ones(1, bool)])
    disorder = xp.concatenate([seg[:-1] > seg[1:], xp.zeros(1, bool)])
    outside = (seg < 0) | (seg >= rows)
    wrong = ends & (disorder | outside)
    bad_index = (idx < 0) | (idx >= limit)
    first = xp.argmax(wrong | bad_index)
    end = xp.argmax(ends & (xp.arange(n) >= first))  # (the end of the first segment with an error)
    found = wrong[first] | bad_index[first]
    extra = {"op": node.op}
    value_ops.report(node.name, found & disorder[end], GraphError.SEGMENT_ORDER, extra=extra)
    value_ops.report(node.name, found & ~disorder[end] & outside[end], GraphError.SEGMENT_RANGE, seg[end], rows,
                     extra=extra)
    value_ops.report(node.name, found & ~wrong[end], GraphError.SPARSE_SEGMENT_INDEX, first, idx[first], limit,
                     extra=extra)


def _scaled(kind: str, out: Any, count: Any) -> Any:
    """A segment's sum scaled as TensorFlow's kernel does: a mean (a square root) of fewer than 10 entries
    times the reciprocal of the count (of its root), of more divided by it."""
    if kind == "sum":
        return out
    c = count.astype(out.dtype)
    c = c if kind == "mean" else jnp.sqrt(c)
    shape = (-1,) + (1,) * (out.ndim - 1)
    safe = jnp.maximum(c, 1).reshape(shape)
    return jnp.where((count < 10).reshape(shape), out * (1 / safe), out / safe)


@_reg("SparseSegmentSum", "SparseSegmentMean", "SparseSegmentSqrtN", "SparseSegmentSumWithNumSegments",
      "SparseSegmentMeanWithNumSegments", "SparseSegmentSqrtNWithNumSegments")
def _sparse_segment(node: Node, args: list[Any]) -> list[Any]:
    """The rows ``data[indices]`` reduced by sorted ``segment_ids`` (sum, mean, sum over the count's square
    root) into ``num_segments`` rows, or the last id plus one (then learned under ``jta.checked`` where the
    ids are traced, as ``SegmentSum``'s: :func:`._ops_segments.sorted_rows`); an empty segment gives zeros."""
    data, indices, ids = args[:3]
    kind = node.op[len("SparseSegment"):].replace("WithNumSegments", "").lower()
    if np.ndim(indices) != 1:
        invalid(node, "indices should be a vector.")
    if np.ndim(ids) != 1:
        invalid(node, "segment_ids should be a vector.")
    if np.shape(indices)[0] != np.shape(ids)[0]:
        invalid(node, "segment_ids and indices should have same size.")
    idx, seg = _int_array(indices).reshape(-1), _int_array(ids).reshape(-1)
    count = seg.shape[0]
    if len(args) == 4:
        rows = int(np.reshape(learned_value(node, args[3], "num_segments"), ()))
        if rows < 0:
            invalid(node, "segment ids must be >= 0")
        if count:
            beyond = seg[-1] + 1 > rows
            invalid_where(node, beyond, "segment ids must be < num_segments")
            if rows == 0:  # (then no id is in range: TensorFlow's kernel says so before its loop)
                invalid_where(node, ~beyond, "segment ids must be >= 0")
    elif count:  # (the last id plus one rows: its check is _sorted_rows's, the others come in the loop's order)
        last = seg[-1] + 1
        value_ops.report(node.name, last < 1, GraphError.SEGMENT_NEGATIVE, extra={"op": node.op})
        rows = int(last) if isinstance(seg, np.ndarray) else learned_size(
            node, last, "segment_ids (the last, plus one, is the output's row count; jta.checked learns it at run "
                        "time)", 0)
    else:
        rows = 0
    if count:
        _segment_checks(node, idx, seg, rows, np.shape(data)[0])
    data = jnp.asarray(data)
    if not count:
        return [jnp.zeros((rows,) + data.shape[1:], data.dtype)]
    idx, seg = jnp.asarray(idx), jnp.asarray(seg)
    picked = jnp.take(data, jnp.clip(idx, 0, data.shape[0] - 1), axis=0)
    out = jax.ops.segment_sum(picked, seg, rows, indices_are_sorted=True)
    return [_scaled(kind, out, jax.ops.segment_sum(jnp.ones(count, jnp.int32), seg, rows))]


def _grad_inputs(node: Node, args: list[Any]) -> tuple[Any, Any, Any, int, str]:
    """A ``SparseSegment*Grad``'s inputs, after its kernel's checks: the last segment id below ``grad``'s
    rows (``Invalid number of segments``), then entry by entry the index in ``[0, output_dim0)`` and the
    segment id in ``[0, rows)`` (a mean's, a root's: all the segment ids first)."""
    grad, indices, ids, dim0 = args
    kind = node.op[len("SparseSegment"):].split("Grad")[0].lower()
    dim0 = int(np.reshape(learned_value(node, dim0, "output_dim0"), ()))
    if np.shape(indices) != np.shape(ids):
        invalid(node, "segment_ids and indices should have same size.")
    idx, seg = _int_array(indices).reshape(-1), _int_array(ids).reshape(-1)
    grad = jnp.asarray(grad)
    rows = grad.shape[0]
    if seg.shape[0]:
        idx, seg, xp = _alike(idx, seg)
        invalid_where(node, seg[-1] + 1 > rows, "Invalid number of segments")
        bad_index, bad_seg = (idx < 0) | (idx >= dim0), (seg < 0) | (seg >= rows)
        ok = seg[-1] + 1 <= rows
        if kind != "sum":  # (a mean's or root's kernel counts the segments first: their ids, then the indices)
            first_seg = xp.argmax(bad_seg)
            value_ops.report(node.name, ok & bad_seg[first_seg], GraphError.SPARSE_GRAD_SEGMENT, seg[first_seg], rows,
                             extra={"op": node.op})
            ok = ok & ~xp.any(bad_seg)
        first = xp.argmax(bad_index | bad_seg)
        value_ops.report(node.name, ok & bad_index[first], GraphError.SPARSE_GRAD_INDEX, idx[first], dim0,
                         extra={"op": node.op})
        value_ops.report(node.name, ok & ~bad_index[first] & bad_seg[first], GraphError.SPARSE_GRAD_SEGMENT, seg[first],
                         rows, extra={"op": node.op})
    return grad, jnp.asarray(idx), jnp.asarray(seg), dim0, kind


def _weighted(grad: Any, seg: Any, kind: str) -> Any:
    """``grad``'s row of each entry's segment, times the segment's scale (1, 1/count, 1/sqrt(count))."""
    rows = jnp.take(grad, jnp.clip(seg, 0, grad.shape[0] - 1), axis=0)
    if kind == "sum":
        return rows
    count = jax.ops.segment_sum(jnp.ones(seg.shape, grad.dtype), seg, grad.shape[0])
    count = count if kind == "mean" else jnp.sqrt(count)
    return rows / jnp.take(jnp.maximum(count, 1), seg).reshape((-1,) + (1,) * (grad.ndim - 1))


@_reg("SparseSegmentSumGrad", "SparseSegmentMeanGrad", "SparseSegmentSqrtNGrad")
def _sparse_segment_grad(node: Node, args: list[Any]) -> list[Any]:
    """The gradient of a ``SparseSegment*`` with respect to its data: each entry's segment's gradient row,
    scaled, added into ``output_dim0`` rows at its index."""
    grad, idx, seg, dim0, kind = _grad_inputs(node, args)
    out = jnp.zeros((dim0,) + grad.shape[1:], grad.dtype)
    return [out.at[idx].add(_weighted(grad, seg, kind), mode="drop")] if idx.shape[0] else [out]


@_reg("SparseSegmentSumGradV2", "SparseSegmentMeanGradV2", "SparseSegmentSqrtNGradV2")
def _sparse_segment_grad_v2(node: Node, args: list[Any]) -> list[Any]:
    """The ``sparse_gradient=True`` form: the rows of the sorted distinct indices only, and those indices.
    Their count is the data's: known in an eager call, learned by ``jta.checked``, refused under ``jit``."""
    grad, idx, seg, _, kind = _grad_inputs(node, args)
    known = known_or_traced(args[1])[0]
    dtype = jax.dtypes.canonicalize_dtype(np.asarray(args[1]).dtype if isinstance(known, np.ndarray) else idx.dtype)
    if isinstance(known, np.ndarray):
        unique = np.unique(known)
        size = unique.size
    else:
        ordered = jnp.sort(idx)
        firsts = jnp.concatenate([jnp.ones(min(idx.shape[0], 1), bool), ordered[1:] != ordered[:-1]])
        size = learned_size(node, jnp.sum(firsts), "indices (the count of distinct indices is the output's row "
                                                   "count; jta.checked learns it at run time)", idx.shape[0])
        unique = jnp.sort(jnp.where(firsts, ordered, jnp.iinfo(ordered.dtype).max))[:size]
    unique = jnp.asarray(unique).astype(dtype)
    place = jnp.searchsorted(unique, idx)
    out = jnp.zeros((size,) + grad.shape[1:], grad.dtype)
    return [out.at[place].add(_weighted(grad, seg, kind), mode="drop") if idx.shape[0] else out, unique]


# -- SparseToDense ---------------------------------------------------------------------------------------
def _index_report(node: Node, bad: Any, first: Any, idx: Any, messages: tuple[GraphError, GraphError],
                  text: str, shape: tuple[int, ...]) -> None:
    """A check of whole index rows (``indices[i] = [a,b] ...``) failing at row ``first``: with its values
    for a rank of 1 or 2; for a higher rank from compiled code without them (``text``)."""
    rank = idx.shape[1]
    if isinstance(bad, (bool, np.bool_)) and bad:
        invalid(node, f"indices[{int(first)}] = [{dims(idx[first])}] {text}")
    if rank > 2:
        invalid_where(node, bad, f"indices[...] {text} (jta: the index is not recorded for rank {rank})")
        return
    fields = [first] + [idx[first, j] for j in range(rank)]
    value_ops.report(node.name, bad, messages[rank - 1], *fields, extra={"op": node.op, "shape": dims(shape)})


@_reg("SparseToDense")
def _sparse_to_dense(node: Node, args: list[Any]) -> list[Any]:
    """``default_value`` everywhere but at ``sparse_indices``, where ``sparse_values`` are (a scalar: at
    all). With ``validate_indices``, row by row: in bounds, sorted, not repeated (TensorFlow's texts); else
    only the bounds, and a repeated index takes its last value."""
    indices, shape, values, default = args
    if np.ndim(indices) > 2:
        invalid(node, f"sparse_indices should be a scalar, vector, or matrix, got shape {dims(np.shape(indices))}")
    n = np.shape(indices)[0] if np.ndim(indices) else 1
    d = np.shape(indices)[1] if np.ndim(indices) > 1 else 1
    shape = _shape(node, shape, "output_shape")
    if len(shape) != d:
        invalid(node, f"output_shape has incorrect number of elements: {len(shape)} should be: {d}")
    if np.ndim(values) > 1 or (np.ndim(values) == 1 and np.shape(values)[0] != n):
        invalid(node, f"sparse_values has incorrect shape [{dims(np.shape(values))}], should be [] or [{n}]")
    if np.ndim(default):
        invalid(node, "default_value should be a scalar.")
    idx = _int_array(indices)
    xp = xp_of(idx)
    idx = xp.reshape(idx, (n, d))
    if n:
        outside = xp.any((idx < 0) | (idx >= np.asarray(shape, np.int64)), axis=1)
        if node.attr("validate_indices", True):
            before, same = _lex_steps(xp, idx) if n > 1 else (xp.zeros(0, bool), xp.zeros(0, bool))
            before, same = (xp.concatenate([xp.zeros(1, bool), b]) for b in (before, same))
            first = xp.argmax(outside | before | same)
            text = f"is out of bounds: need 0 <= index < [{dims(shape)}]"
            _index_report(node, outside[first], first, idx, (GraphError.SPARSE_BOUNDS_1, GraphError.SPARSE_BOUNDS_2), text, shape)
            _index_report(node, ~outside[first] & before[first], first, idx, (GraphError.SPARSE_ORDER_1, GraphError.SPARSE_ORDER_2),
                          "is out of order. Many sparse ops require sorted indices.\n    Use `tf.sparse.reorder` "
                          "to create a correctly ordered copy.\n\n", shape)
            _index_report(node, ~outside[first] & ~before[first] & same[first], first, idx,
                          (GraphError.SPARSE_REPEAT_1, GraphError.SPARSE_REPEAT_2), "is repeated", shape)
        else:
            invalid_where(node, xp.any(outside), f"Indices are not valid (out of bounds).  Shape: [{dims(shape)}]")
    values, default = jnp.asarray(values), jnp.asarray(default)
    out = jnp.broadcast_to(default.astype(values.dtype), shape)
    if not n or 0 in shape:
        return [out]
    return [out.at[tuple(jnp.asarray(idx).T)].set(jnp.broadcast_to(values, (n,)), mode="drop")]


# -- SparseTensorDenseMatMul, SparseTensorDenseAdd, SparseDenseCwise{Add,Mul,Div} ---------------------------
@_reg("SparseTensorDenseMatMul")
def _sparse_dense_matmul(node: Node, args: list[Any]) -> list[Any]:
    """``A @ B`` of a sparse matrix ``A`` (either adjointed): each entry's value times its row of ``B``,
    added into its row of the result, in the entries' order, as TensorFlow's kernel adds them."""
    a_indices, a_values, a_shape, b = args
    adj_a, adj_b = bool(node.attr("adjoint_a", False)), bool(node.attr("adjoint_b", False))
    shape = _shape(node, a_shape, "a_shape")
    if len(shape) != 2 or np.ndim(a_indices) != 2 or np.ndim(b) != 2:
        invalid(node, f"Tensor 'a_shape' is not a vector of 2 elements: [{dims(shape)}]")
    b = jnp.asarray(b)
    rows, inner = (shape[1], shape[0]) if adj_a else shape
    inner_b, cols = (b.shape[1], b.shape[0]) if adj_b else b.shape
    if inner != inner_b:
        invalid(node, f"Cannot multiply A and B because inner dimension does not match: {inner} vs. {inner_b}.  "
                      f"Did you forget a transpose?  Dimensions of A: [{shape[0]}, {shape[1]}).  Dimensions of B: "
                      f"[{dims(b.shape)}]")
    idx = _int_array(a_indices)
    xp = xp_of(idx)
    m, k = (idx[:, 1], idx[:, 0]) if adj_a else (idx[:, 0], idx[:, 1])
    if np.shape(idx)[0]:
        bad_k, bad_m = (k < 0) | (k >= inner), (m < 0) | (m >= rows)
        first = xp.argmax(bad_k | bad_m)
        value_ops.report(node.name, bad_k[first], GraphError.SPARSE_MATMUL_INDEX, k[first], first, inner,
                         extra={"op": node.op, "letter": "k", "column": "0" if adj_a else "1"})
        value_ops.report(node.name, ~bad_k[first] & bad_m[first], GraphError.SPARSE_MATMUL_INDEX, m[first], first, rows,
                         extra={"op": node.op, "letter": "m", "column": "1" if adj_a else "0"})
    values = jnp.asarray(a_values)
    values, b = (jnp.conj(values) if adj_a else values), (jnp.conj(b).T if adj_b else b)
    if not np.shape(idx)[0]:
        return [jnp.zeros((rows, cols), jnp.result_type(values, b))]
    m, k = jnp.asarray(m), jnp.asarray(k)
    products = values[:, None] * jnp.take(b, jnp.clip(k, 0, inner - 1), axis=0)
    return [jax.ops.segment_sum(products, m, rows)]


@_reg("SparseTensorDenseAdd")
def _sparse_dense_add(node: Node, args: list[Any]) -> list[Any]:
    """``B`` with the sparse tensor's values added at their indices (a repeated index adds each)."""
    a_indices, a_values, a_shape, b = args
    shape, b = _shape(node, a_shape, "a_shape"), jnp.asarray(b)
    if len(shape) != b.ndim:
        invalid(node, f"Two operands have different ranks; received: {len(shape)} and {b.ndim}")
    for d, (s, t) in enumerate(zip(shape, b.shape, strict=True)):
        if s != t:
            invalid(node, f"Dimension {d} does not equal (no broadcasting is supported): sparse side {s} vs dense "
                          f"side {t}")
    idx = _int_array(a_indices)
    xp = xp_of(idx)
    if not np.shape(idx)[0]:
        return [b]
    bad = (idx < 0) | (idx >= np.asarray(b.shape, np.int64))
    flat = xp.argmax(xp.reshape(bad, -1))
    i, d = flat // b.ndim, flat % b.ndim
    value_ops.report(node.name, xp.reshape(bad, -1)[flat], GraphError.SPARSE_DENSE_ADD_INDEX, i, d, idx[i, d],
                     extra={"op": node.op, "shape": dims(b.shape, " ")})
    return [b.at[tuple(jnp.asarray(idx).T)].add(jnp.asarray(a_values).astype(b.dtype), mode="drop")]


@_reg("SparseDenseCwiseAdd", "SparseDenseCwiseMul", "SparseDenseCwiseDiv")
def _sparse_dense_cwise(node: Node, args: list[Any]) -> list[Any]:
    """The sparse tensor's values with the dense tensor (broadcast to the sparse shape) at their indices:
    added, multiplied, divided; the result's values (the indices stay)."""
    sp_indices, sp_values, sp_shape, dense = args
    shape, dense = _shape(node, sp_shape, "sp_shape"), jnp.asarray(dense)
    lead = len(shape) - dense.ndim
    if lead < 0 or any(t not in (1, s) for s, t in zip(shape[lead:], dense.shape, strict=True)):
        invalid(node, f"SparseDenseBinaryOpShared broadcasts dense to sparse only; got incompatible shapes: "
                      f"[{dims(shape)}] vs. [{dims(dense.shape)}]")
    idx = _int_array(sp_indices)
    xp = xp_of(idx)
    if np.shape(idx)[0]:
        invalid_where(node, xp.any((idx < 0) | (idx >= np.asarray(shape, np.int64))),
                     "Provided indices are out-of-bounds w.r.t. dense side with broadcasted shape")
    idx = jnp.asarray(idx)
    at = tuple(jnp.clip(idx[:, lead + j], 0, t - 1) if t != 1 else jnp.zeros(idx.shape[0], idx.dtype)
               for j, t in enumerate(dense.shape))
    other, values = dense[at], jnp.asarray(sp_values)
    if node.op.endswith("Add"):
        return [values + other]
    if node.op.endswith("Mul"):
        return [values * other]
    return [values / other if jnp.issubdtype(values.dtype, jnp.inexact) else jax.lax.div(values, other)]


# -- SparseReduceSum, SparseSoftmax, SparseReorder, SparseReshape -------------------------------------------
def _lex_order(xp: Any, idx: Any) -> Any:
    """The stable order that sorts the rows of ``idx`` lexicographically (``SparseTensor::Reorder``)."""
    return xp.lexsort([idx[:, j] for j in reversed(range(idx.shape[1]))])


@_reg("SparseReduceSum")
def _sparse_reduce_sum(node: Node, args: list[Any]) -> list[Any]:
    """The dense sum of a sparse tensor over ``reduction_axes`` (static; negative, repeated allowed),
    ``keep_dims`` as ``tf.reduce_sum``'s. An entry whose kept coordinates fall outside the dense shape fails
    with TensorFlow's class (``InternalError``) and text."""
    indices, values, shape, axes = args
    shape = _shape(node, shape, "input_shape")
    rank = len(shape)
    reduced = set()
    for a in np.reshape(static_value(node, axes, "reduction_axes"), -1).tolist():
        if not -rank <= a < rank:
            invalid(node, f"Invalid reduction dimension {a}, for input with {rank} dimensions.")
        reduced.add(a % rank)
    kept = [d for d in range(rank) if d not in reduced]
    out_shape = tuple(shape[d] for d in kept)
    size = int(np.prod(out_shape, dtype=np.int64))
    idx = _int_array(indices)
    xp = xp_of(idx)
    values = jnp.asarray(values)
    written = xp.zeros(np.shape(idx)[0], idx.dtype)
    for d in kept:
        written = written * shape[d] + idx[:, d]
    if np.shape(idx)[0] and kept:
        bad = (written < 0) | (written >= size)
        first = xp.argmax(bad)
        value_ops.report(node.name, bad[first], GraphError.SPARSE_REDUCE_WRITE, written[first], size, extra={"op": node.op})
    out = jax.ops.segment_sum(values, jnp.asarray(written), size) if size else jnp.zeros(0, values.dtype)
    keep = bool(node.attr("keep_dims", False))
    return [out.reshape(tuple(1 if d in reduced else shape[d] for d in range(rank)) if keep else out_shape)]


def _groups(xp: Any, idx: Any) -> Any:
    """For lexicographically sorted ``idx``: each row's group (all coordinates but the last), numbered."""
    lead = idx[:, :-1]
    new = xp.concatenate([xp.ones(1, bool), xp.any(lead[1:] != lead[:-1], axis=1)])
    return xp.cumsum(new) - 1


@_reg("SparseSoftmax")
def _sparse_softmax(node: Node, args: list[Any]) -> list[Any]:
    """The softmax of the values that share all coordinates but the last. TensorFlow's kernel sorts the
    entries first and gives the values in that order (the same as the input's for sorted indices)."""
    indices, values, shape = args
    shape = _shape(node, shape, "sp_shape")
    if len(shape) < 2:
        invalid(node, f"Input should have rank >= 2, but received shape: {dims(shape, ' ')}")
    n = np.shape(indices)[0]
    values = jnp.asarray(values)
    if not n:
        return [values]
    idx = _int_array(indices)
    xp = xp_of(idx)
    order = _lex_order(xp, idx)
    group = jnp.asarray(_groups(xp, idx[order]))
    x = values[jnp.asarray(order)]
    top = jax.ops.segment_max(x, group, n, indices_are_sorted=True)
    e = jnp.exp(x - top[group])
    return [e / jax.ops.segment_sum(e, group, n, indices_are_sorted=True)[group]]


@_reg("SparseReorder")
def _sparse_reorder(node: Node, args: list[Any]) -> list[Any]:
    """The entries sorted by their indices (lexicographically, stable: repeated indices keep their order);
    no bounds are checked, as in TensorFlow."""
    indices, values, _ = args
    idx = _int_array(indices)
    xp = xp_of(idx)
    if not np.shape(idx)[0]:
        return [idx, jnp.asarray(values)]
    order = _lex_order(xp, idx)
    return [idx[order], jnp.asarray(values)[jnp.asarray(order)]]


@_reg("SparseReshape")
def _sparse_reshape(node: Node, args: list[Any]) -> list[Any]:
    """The indices of the same entries in the tensor reshaped to ``new_shape`` (one ``-1`` inferred), and that
    shape: each index's row-major place, unravelled in the new shape (the first coordinate unbounded, as
    TensorFlow's kernel divides)."""
    indices, shape, wanted = args
    shape = _shape(node, shape, "input_shape")
    wanted = list(_shape(node, wanted, "new_shape"))
    dense = int(np.prod(shape, dtype=np.int64))
    unknown = [d for d, s in enumerate(wanted) if s == -1]
    if len(unknown) > 1:
        invalid(node, f"only one output dimension may be -1, not both {unknown[0]} and {unknown[1]}")
    product = int(np.prod([s for s in wanted if s != -1], dtype=np.int64))
    if unknown:
        wanted[unknown[0]] = dense // product if product else 0
        if product == 0 or dense % product:
            invalid(node, f"Input to reshape is a SparseTensor with {dense} dense values, but the requested shape "
                          f"requires a multiple of {product}. input_shape=[{dims(shape)}] output_shape="
                          f"[{dims(wanted)}]")
    elif product != dense:
        invalid(node, f"Input to reshape is a tensor with {dense} dense values, but the requested shape has "
                      f"{product}. input_shape=[{dims(shape)}] output_shape=[{dims(wanted)}]")
    idx = _int_array(indices)
    xp = xp_of(idx)
    place = xp.zeros(np.shape(idx)[0], idx.dtype)
    for d, s in enumerate(shape):
        place = place * s + idx[:, d]
    strides = np.cumprod([1, *wanted[:0:-1]], dtype=np.int64)[::-1]
    cols, rest = [], place
    for stride in strides.tolist():
        cols.append(rest // stride)
        rest = rest % stride
    out = xp.stack(cols, axis=1) if cols else xp.zeros((np.shape(idx)[0], 0), idx.dtype)
    return [out.astype(idx.dtype), np.asarray(wanted, np.int64)]


# -- SparseFillEmptyRows and its gradient -------------------------------------------------------------------
@_reg("SparseFillEmptyRows")
def _sparse_fill_empty_rows(node: Node, args: list[Any]) -> list[Any]:
    """The entries grouped by row (stable), with ``default_value`` at ``[row, 0, ...]`` of each row that has
    none; which rows were empty; where each entry went. The entries' count grows by the empty rows':
    known in an eager call, learned by ``jta.checked`` at run time, refused under a bare ``jit``."""
    indices, values, shape, default = args
    shape = _shape(node, shape, "dense_shape")
    n, dense_rows = np.shape(indices)[0], shape[0]
    if dense_rows == 0 and n:
        invalid(node, f"Received SparseTensor with dense_shape[0] = 0 but indices.shape[0] = {n}")
    idx = _int_array(indices)
    xp = xp_of(idx)
    rows = idx[:, 0] if n else xp.zeros(0, idx.dtype)
    if n:
        bad = (rows < 0) | (rows >= dense_rows)
        first = xp.argmax(bad)
        value_ops.report(node.name, bad[first], GraphError.SPARSE_FILL_ROW, first, rows[first], dense_rows,
                         extra={"op": node.op})
    if xp is np:  # (the rows known: the count of entries too, a shape)
        count = np.bincount(rows, minlength=dense_rows).astype(np.int32)
        total = n + int(np.sum(count == 0))
    else:
        count = jax.ops.segment_sum(jnp.ones(n, jnp.int32), rows, dense_rows)
        total = learned_size(node, n + jnp.sum(count == 0), "the rows without entries (each adds one to the "
                             "output's entries; jta.checked learns their count at run time)", n,
                             n + int(dense_rows))
    empty = count == 0
    slots = jnp.where(empty, 1, count)
    start = jnp.cumsum(slots) - slots
    rows = jnp.asarray(rows)
    order = jnp.argsort(rows, stable=True)
    ordered = rows[order]
    rank = jnp.zeros(n, jnp.int32).at[order].set(jnp.arange(n) - jnp.searchsorted(ordered, ordered, side="left"))
    place = start[jnp.clip(rows, 0, max(dense_rows - 1, 0))] + rank if n else jnp.zeros(0, jnp.int32)
    rank_dims = len(shape)
    fill_at = jnp.where(empty, start, total)
    out_idx = jnp.zeros((total, rank_dims), jnp.asarray(idx).dtype)
    out_idx = out_idx.at[place].set(jnp.asarray(idx), mode="drop")
    out_idx = out_idx.at[fill_at, 0].set(jnp.arange(dense_rows, dtype=out_idx.dtype), mode="drop")
    values = jnp.asarray(values)
    out_values = jnp.broadcast_to(jnp.asarray(default, values.dtype), (total,)).at[place].set(values, mode="drop")
    return [out_idx, out_values, empty, place.astype(jax.dtypes.canonicalize_dtype(np.int64))]


@_reg("SparseFillEmptyRowsGrad")
def _sparse_fill_empty_rows_grad(node: Node, args: list[Any]) -> list[Any]:
    """The gradients of ``SparseFillEmptyRows``'s values (the output's at ``reverse_index_map``) and of its
    default value (the sum of the rest)."""
    reverse, grad = args
    grad = jnp.asarray(grad)
    total = grad.shape[0]
    at = _int_array(reverse)
    xp = xp_of(at)
    if np.shape(at)[0]:
        bad = (at < 0) | (at >= total)
        first = xp.argmax(bad)
        value_ops.report(node.name, bad[first], GraphError.SPARSE_FILL_GRAD, at[first], total, extra={"op": node.op})
    at = jnp.asarray(at)
    taken = jnp.zeros(total, bool).at[at].set(True, mode="drop")
    return [jnp.take(grad, jnp.clip(at, 0, max(total - 1, 0))), jnp.sum(jnp.where(taken, 0, grad))]
