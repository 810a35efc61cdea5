"""Connectionist temporal classification: ``CTCLoss`` (what ``tf.nn.ctc_loss`` of ``SparseTensor`` labels
and tf_keras's ``backend.ctc_batch_cost`` run; dense labels run a Python implementation of ordinary
ops) and ``CTCGreedyDecoder`` (``tf.nn.ctc_greedy_decoder``), computed as TensorFlow's CPU kernels
(``ctc_loss_op.cc`` with ``ctc_loss_calculator.h``, ``ctc_decoder_ops.cc``) compute them.

``CTCLoss`` takes time-major logits ``[T, B, C]`` (class ``C - 1`` is the blank), the labels as a
sparse tensor's indices and values, and each sequence's length. A label sequence is read as the
kernel reads it: its values in order (with ``preprocess_collapse_repeated``, a value equal to the one
before it dropped), ending at the first value ``>= C - 1``. The forward and backward variables run in
log space over the sequence with blanks between the labels (length ``2 L + 1``), in
:func:`jax.lax.scan` over time (the lengths may be traced: steps past a sequence's length leave its
variables as they are); ``ctc_merge_repeated`` says whether a label may stay for several steps.
Outputs: the loss ``-log p(labels | logits)`` and its gradient with respect to the logits,
``softmax - posterior`` (``softmax`` itself where no path is possible, the loss ``inf``; zero for an
empty sequence, or, with ``ignore_longer_outputs_than_inputs``, labels longer than their sequence).
Values agree with TensorFlow's within float32 rounding (its sums of logs run in another order).

The derivative is TensorFlow's registered one (``ctc_ops.py``, ``_CTCLossGrad``): the op's own
``gradient`` output times the loss's cotangent; a second derivative raises TensorFlow's ``LookupError``
(its ``PreventGradient``). Bad labels or lengths fail with the kernel's texts when they are known
(constants, an eager call); from compiled code with the same texts, less the numbers the data decides.

``CTCGreedyDecoder`` takes each step's most likely class (the first of equal ones, as the kernel's
strict ``>``), drops blanks and (``merge_repeated``) repeats, and gives the sparse result's indices,
values and shape, and each sequence's ``-sum`` of its steps' maxima. How many entries the result has
is the data's: known in an eager call, learned by ``jta.checked`` under ``jit`` (as ``Where``'s count
is), refused under a bare ``jit``.

Not here: ``CTCLossV2`` (cuDNN's, blank 0: TensorFlow has only a GPU kernel; ``tf.nn.ctc_loss``'s graph holds
it in the GPU alternative of its function, which the import does not run) and ``CTCBeamSearchDecoder``.
"""

from __future__ import annotations

import functools
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from ._messages import GraphError
from ._nodes import Node
from ._ops import OPS, learned_size, registrar
from ._ops_checks import dims, failed_precondition, invalid, invalid_where, known_now

_reg = registrar(OPS)

_SECOND_DERIVATIVE = ("Gradient explicitly disabled. Reason: b\"Currently there is no way to take the second  "
                      "derivative of ctc_loss due to the fused implementation's interaction  with tf.gradients()\"")
_LONGER = ("Not enough time for target transition sequence (required: {0}, available: {1}){2}You can turn this "
           "error into a warning by using the flag ignore_longer_outputs_than_inputs")


def _labels_now(node: Node, indices: np.ndarray, values: np.ndarray, seq_len: np.ndarray, shape: tuple[int, ...],
                collapse: bool, ignore: bool) -> None:
    """The kernel's checks of known labels and lengths, in its order, with its texts."""
    time, batch, classes = shape
    width = max([0, *(int(i) + 1 for i in indices[:, 1])]) if indices.shape[1] > 1 else 0
    bounds = [batch, width]
    for k, index in enumerate(indices):
        shown = ",".join(str(int(v)) for v in index)
        if any(not 0 <= int(v) < b for v, b in zip(index, bounds, strict=False)):
            invalid(node, f"label SparseTensor is not valid: indices[{k}] = [{shown}] is out of bounds: need "
                          f"0 <= index < [{dims(bounds)}]")
        if k and tuple(indices[k]) <= tuple(indices[k - 1]):
            what = "is repeated" if tuple(indices[k]) == tuple(indices[k - 1]) else \
                "is out of order. Many sparse ops require sorted indices.\n    Use `tf.sparse.reorder` to create " \
                "a correctly ordered copy.\n\n"
            invalid(node, f"label SparseTensor is not valid: indices[{k}] = [{shown}] {what}")
    _lengths_checks(node, seq_len, time)
    groups = [values[indices[:, 0] == b] for b in range(batch)]
    for b, label in enumerate(groups):
        raw = [int(v) for v in label]
        if not raw:
            invalid(node, f"Labels length is zero in batch {b}")
        kept, finished = [], False
        for i, v in enumerate(raw):
            if i == 0 or not collapse or v != raw[i - 1]:
                if v >= classes - 1:
                    finished = True
                elif finished:
                    invalid(node, f"Saw a non-null label (index >= num_classes - 1) following a null label, batch: "
                                  f"{b} num_classes: {classes} labels: {dims(raw)} labels seen so far: {dims(kept)}")
                else:
                    kept.append(v)
        if any(v < 0 for v in kept):
            invalid(node, f"All labels must be nonnegative integers, batch: {b} labels: {dims(kept)}")
        if not ignore and len(raw) > int(seq_len[b]):
            invalid(node, _LONGER.format(len(raw), int(seq_len[b]), b))


def _lengths_checks(node: Node, seq_len: Any, time: int) -> None:
    """``sequence_length(b) <= T`` (the op's check), then ``seq_len(b) < 0`` (the calculator's)."""
    known = known_now(seq_len)
    if known is not None:
        for b, n in enumerate(known):
            if n > time:
                invalid(node, f"sequence_length({b}) <= {time}")
        for b, n in enumerate(known):
            if n < 0:
                invalid(node, f"seq_len({b}) < 0")
        return
    invalid_where(node, jnp.any(seq_len > time), f"sequence_length(b) <= {time} (for some batch entry b)")
    invalid_where(node, jnp.any(seq_len < 0), "seq_len(b) < 0 (for some batch entry b)")


def _dense_labels(indices: Any, values: Any, batch: int, width: int, classes: int,
                  collapse: bool) -> tuple[Any, Any, Any, Any, Any]:
    """The labels, read as the kernel reads them (the indices sorted by entry): ``[B, width]`` kept values
    (blank-padded), how many were kept and how many given per entry, and whether a kept value follows a
    stop or is negative (errors)."""
    n = values.shape[0]
    which = jnp.clip(indices[:, 0], 0, batch - 1).astype(jnp.int32)
    given = jax.ops.segment_sum(jnp.ones(n, jnp.int32), which, batch)
    first = jnp.minimum(jnp.cumsum(given) - given, max(n - 1, 0))[which]  # (each value's entry's first value)

    def before(a: Any) -> Any:  # how many of the entry's values before each one have ``a``
        a = a.astype(jnp.int32)
        exclusive = jnp.cumsum(a) - a
        return exclusive - exclusive[first]

    rank = jnp.arange(n, dtype=jnp.int32) - first
    previous = jnp.concatenate([jnp.full((1,), -1, values.dtype), values[:-1]])
    considered = (rank == 0) | (not collapse) | (values != previous)
    stop = considered & (values >= classes - 1)
    label = considered & ~stop
    kept = label & (before(stop) == 0)
    dense = jnp.full((batch, width), classes - 1, jnp.int32)
    dense = dense.at[which, jnp.where(kept, before(kept), width)].set(values.astype(jnp.int32), mode="drop")
    count = jax.ops.segment_sum(kept.astype(jnp.int32), which, batch)
    return dense, count, given, jnp.any(label & ~kept), jnp.any(kept & (values < 0))


def _labels_traced(node: Node, indices: Any, seq_len: Any, given: Any, after_stop: Any, negative: Any,
                   ignore: bool) -> None:
    """The kernel's checks of traced labels (from compiled code; the texts less what the data decides)."""
    batch = seq_len.shape[0]
    if indices.shape[0]:
        previous = indices[:-1]
        outside = jnp.any((indices < 0) | (indices[:, :1] >= batch))
        unordered = jnp.any((indices[1:, 0] < previous[:, 0]) |
                            ((indices[1:, 0] == previous[:, 0]) & (indices[1:, 1] <= previous[:, 1])))
        invalid_where(node, jnp.any(outside), "label SparseTensor is not valid: an index is out of bounds")
        invalid_where(node, jnp.any(~outside & unordered), "label SparseTensor is not valid: indices are out of order or "
                                                  "repeated. Many sparse ops require sorted indices.")
    invalid_where(node, jnp.any(given == 0), "Labels length is zero in batch b (for some batch entry b)")
    invalid_where(node, jnp.any(after_stop), "Saw a non-null label (index >= num_classes - 1) following a null label")
    invalid_where(node, jnp.any(negative), "All labels must be nonnegative integers")
    if not ignore:
        invalid_where(node, jnp.any(given > seq_len), "Not enough time for target transition sequence (a label sequence is "
                                             "longer than its sequence_length). You can turn this error into a "
                                             "warning by using the flag ignore_longer_outputs_than_inputs")


# -- the forward-backward, of logits [T, B, C] and the sequences with blanks [B, U] ----------------------------------
def _lse(a: Any, b: Any) -> Any:
    return jnp.logaddexp(a, b)


def _variables(logy: Any, extended: Any, length: Any, seq_len: Any, merge: bool) -> tuple[Any, Any]:
    """``CalculateForwardVariables`` and ``CalculateBackwardVariables``: log alpha and log beta, ``[T, B, U]``
    (``-inf`` past each sequence with blanks, ``length`` long; alpha held past ``seq_len``, beta from it)."""
    time, _, _ = logy.shape
    u = jnp.arange(extended.shape[1])
    blank = logy.shape[2] - 1
    inside = u[None] < length[:, None]
    is_blank = extended == blank
    stay = jnp.asarray(merge) | is_blank
    earlier = jnp.pad(extended, ((0, 0), (2, 0)), constant_values=-1)[:, :-2]
    skip = (u[None] > 1) & ~is_blank & ~(merge & (extended == earlier))  # (a label may follow the one 2 back)
    emit = jnp.take_along_axis(logy, jnp.broadcast_to(extended, (time, *extended.shape)), axis=2)
    neg = jnp.asarray(-jnp.inf, logy.dtype)

    def forward(alpha: Any, row: Any) -> Any:
        t, e = row
        total = _lse(_lse(jnp.where(stay, alpha, neg), jnp.pad(alpha, ((0, 0), (1, 0)), constant_values=-jnp.inf)[:, :-1]),
                     jnp.where(skip, jnp.pad(alpha, ((0, 0), (2, 0)), constant_values=-jnp.inf)[:, :-2], neg))
        new = jnp.where(inside, e + total, neg)
        new = jnp.where((t < seq_len)[:, None], new, alpha)
        return new, new

    alpha0 = jnp.where(inside & (u[None] < 2), emit[0], neg)
    _, alphas = jax.lax.scan(forward, alpha0, (jnp.arange(1, time), emit[1:]))
    alphas = jnp.concatenate([alpha0[None], alphas])

    ends = inside & (u[None] >= length[:, None] - 2)
    beta_end = jnp.where(ends, jnp.zeros_like(emit[0]), neg)
    skip_back = jnp.pad(skip, ((0, 0), (0, 2)))[:, 2:]

    def backward(beta: Any, row: Any) -> Any:
        t, e = row
        after = beta + e  # (beta(u, t + 1) + log y(l'[u], t + 1))
        total = _lse(_lse(jnp.where(stay, after, neg), jnp.pad(after, ((0, 0), (0, 1)), constant_values=-jnp.inf)[:, 1:]),
                     jnp.where(skip_back, jnp.pad(after, ((0, 0), (0, 2)), constant_values=-jnp.inf)[:, 2:], neg))
        new = jnp.where((t >= seq_len - 1)[:, None], beta_end, jnp.where(inside, total, neg))
        return new, new

    nexts = jnp.concatenate([emit[1:], emit[:1]])
    _, betas = jax.lax.scan(backward, beta_end, (jnp.arange(time), nexts), reverse=True)
    return alphas, betas


def _loss_and_gradient(x: Any, dense: Any, count: Any, seq_len: Any, active: Any, merge: bool) -> tuple[Any, Any]:
    """``CalculateLoss``: each entry's loss and the gradient with respect to the logits."""
    time, batch, classes = x.shape
    shifted = jnp.exp(x - jnp.max(x, axis=2, keepdims=True))  # (the kernel's softmax, then its log)
    y = shifted / jnp.sum(shifted, axis=2, keepdims=True)
    logy = jnp.log(y)
    extended = jnp.full((batch, 2 * dense.shape[1] + 1), classes - 1, jnp.int32).at[:, 1::2].set(dense)
    alphas, betas = _variables(logy, extended, 2 * count + 1, seq_len, merge)
    log_p = jax.nn.logsumexp(alphas[0] + betas[0], axis=1)
    found = log_p > -jnp.inf
    posterior = jnp.exp(alphas + betas - jnp.where(found, log_p, 0)[None, :, None])
    b = jnp.arange(batch)[None, :, None]
    occupied = jnp.zeros_like(y).at[jnp.arange(time)[:, None, None], b, extended[None]].add(posterior)
    step = (jnp.arange(time)[:, None] < seq_len[None]) & active[None]
    gradient = jnp.where(step[..., None], jnp.where(found[None, :, None], y - occupied, y), 0).astype(x.dtype)
    return jnp.where(active, -log_p, 0).astype(x.dtype), gradient


def _refuse_second(_: Any, cotangent: Any) -> Any:
    raise LookupError(_SECOND_DERIVATIVE)


@jax.custom_vjp
def _prevented(g: Any) -> Any:
    """``PreventGradient`` of the op's gradient output: a derivative through it raises TensorFlow's error."""
    return g


_prevented.defvjp(lambda g: (g, None), _refuse_second)


@functools.partial(jax.custom_vjp, nondiff_argnums=(5,))
def _ctc(x: Any, dense: Any, count: Any, seq_len: Any, active: Any, merge: bool) -> tuple[Any, Any]:
    return _loss_and_gradient(x, dense, count, seq_len, active, merge)


def _ctc_fwd(x: Any, dense: Any, count: Any, seq_len: Any, active: Any, merge: bool) -> tuple[Any, Any]:
    loss, gradient = _loss_and_gradient(x, dense, count, seq_len, active, merge)
    return (loss, gradient), gradient


def _ctc_bwd(merge: bool, gradient: Any, cotangents: Any) -> tuple[Any, ...]:
    """``_CTCLossGrad``: the loss's cotangent times the op's gradient output (the gradient output's own
    cotangent is dropped, as TensorFlow's function drops it)."""
    g_loss, _ = cotangents
    return g_loss[None, :, None] * _prevented(gradient), None, None, None, None


_ctc.defvjp(_ctc_fwd, _ctc_bwd)


@_reg("CTCLoss")
def _ctc_loss(node: Node, args: list[Any]) -> list[Any]:
    """The CTC loss of time-major logits and sparse labels (blank ``C - 1``), and its gradient."""
    inputs, indices, values, seq_len = args
    for a, rank, text in ((inputs, 3, "inputs is not a 3-Tensor"), (seq_len, 1, "sequence_length is not a vector"),
                          (indices, 2, "labels_indices is not a matrix"), (values, 1, "labels_values is not a vector")):
        if np.ndim(a) != rank:
            invalid(node, text)
    time, batch, classes = np.shape(inputs)
    if time == 0:
        invalid(node, "Max time or first dimension of input cannot be 0.")
    if np.shape(seq_len)[0] != batch:
        invalid(node, f"len(sequence_length) != batch_size.  len(sequence_length):  {np.shape(seq_len)[0]} "
                      f"batch_size: {batch}")
    if np.shape(indices)[0] != np.shape(values)[0]:
        invalid(node, "labels_indices and labels_values must contain the same number of rows, but saw shapes: "
                      f"[{dims(np.shape(indices))}] vs. [{dims(np.shape(values))}]")
    if batch == 0:
        invalid(node, "batch_size must not be 0")
    collapse = bool(node.attr("preprocess_collapse_repeated", False))
    merge = bool(node.attr("ctc_merge_repeated", True))
    ignore = bool(node.attr("ignore_longer_outputs_than_inputs", False))
    known_indices, known_values, known_lengths = known = [known_now(a) for a in (indices, values, seq_len)]
    if known_indices is not None and known_values is not None and known_lengths is not None:
        _labels_now(node, known_indices, known_values, known_lengths, (time, batch, classes), collapse, ignore)
    n = np.shape(values)[0]
    dense, count, given, after_stop, negative = _dense_labels(
        jnp.asarray(indices), jnp.asarray(values), batch, max(min(n, time), 1), classes, collapse) if n else \
        (jnp.full((batch, 1), classes - 1, jnp.int32), jnp.zeros(batch, jnp.int32), jnp.zeros(batch, jnp.int32),
         jnp.asarray(False), jnp.asarray(False))
    seq_len = jnp.asarray(seq_len).astype(jnp.int32)
    if any(k is None for k in known):
        _lengths_checks(node, seq_len, time)
        _labels_traced(node, jnp.asarray(indices), seq_len, given, after_stop, negative, ignore)
    active = (seq_len > 0) & (~jnp.asarray(ignore) | (given <= seq_len))
    x = jnp.asarray(inputs)
    x = x.astype(jax.dtypes.canonicalize_dtype(x.dtype))
    loss, gradient = _ctc(x, dense, count, seq_len, active, merge)  # pyright: ignore[reportGeneralTypeIssues]
    return [loss, gradient]


def _row_max(xp: Any, x: Any) -> tuple[Any, Any]:
    """``RowMax``: each row's first largest entry (the kernel's strict ``>`` from entry 0: a NaN is never
    taken, except at 0, where it stays) and its index."""
    later = xp.where(xp.isnan(x[..., 1:]), -xp.inf, x[..., 1:])
    rest = xp.argmax(later, axis=-1) + 1
    best = xp.take_along_axis(later, (rest - 1)[..., None], axis=-1)[..., 0] if x.shape[-1] > 1 else None
    first = x[..., 0]
    if best is None:
        return xp.zeros(first.shape, np.int32), first
    take = xp.isnan(first) | ~(best > first)
    return xp.where(take, 0, rest).astype(np.int32), xp.where(take, first, best)


@_reg("CTCGreedyDecoder")
def _ctc_greedy_decoder(node: Node, args: list[Any]) -> list[Any]:
    """Best-path decoding of time-major logits: the sparse decoded sequences and their negated scores."""
    inputs, seq_len = args
    if np.ndim(inputs) != 3:
        invalid(node, "inputs is not a 3-Tensor")
    if np.size(inputs) == 0:
        invalid(node, "inputs must not be empty")
    time, batch, classes = np.shape(inputs)
    if np.ndim(seq_len) != 1:
        invalid(node, "sequence_length is not a vector")
    if np.shape(seq_len)[0] != batch:
        failed_precondition(node, f"len(sequence_length) != batch_size.  len(sequence_length):  "
                                  f"{np.shape(seq_len)[0]} batch_size: {batch}")
    lengths = known_now(seq_len)
    if lengths is not None:
        for b, n in enumerate(lengths):
            if n > time:
                failed_precondition(node, f"sequence_length({b}) <= {time}")
    else:
        invalid_where(node, jnp.any(jnp.asarray(seq_len) > time),
                      f"sequence_length(b) <= {time} (for some batch entry b)", GraphError.FAILED_PRECONDITION)
    blank_attr = int(node.attr("blank_index", -1))
    blank = classes + blank_attr if blank_attr < 0 else blank_attr
    if not 0 <= blank < classes:
        invalid(node, f"blank_index expected to be between {-classes} and {classes - 1} but was {blank_attr}")
    merge = bool(node.attr("merge_repeated", True))
    x = known_now(inputs)
    xp: Any = np if x is not None and lengths is not None else jnp  # (numpy: an eager call's int64 results)
    x = xp.asarray(inputs if x is None else x)
    cls, top = _row_max(xp, x)  # [T, B]
    steps = xp.arange(time)[:, None] < xp.asarray(seq_len if lengths is None else lengths)[None]
    previous = xp.concatenate([xp.full((1, batch), -1, np.int32), cls[:-1]])
    emitted = (steps & (cls != blank) & ~(merge & (cls == previous))).T  # [B, T]
    log_prob = xp.sum(xp.where(steps, -top, 0), axis=0)[:, None]  # (+0 for an empty sequence)
    counts = emitted.sum(axis=1)
    total = int(counts.sum()) if xp is np else learned_size(
        node, counts.sum(), "its inputs (the number of decoded entries is the result's shape; jta.checked learns "
                            "it at run time)", 0, int(emitted.size))
    flat = xp.nonzero(emitted.reshape(-1)) if xp is np else jnp.nonzero(emitted.reshape(-1), size=total)
    where = flat[0]
    rows = where // time
    first = xp.cumsum(counts) - counts
    index_dtype = np.int64 if xp is np else jax.dtypes.canonicalize_dtype(np.int64)
    indices = xp.stack([rows, xp.arange(total) - first[rows]], axis=1).astype(index_dtype)
    values = cls.T.reshape(-1)[where].astype(index_dtype)
    shape = xp.stack([xp.asarray(batch), xp.max(counts, initial=0)]).astype(index_dtype)
    return [indices, values, shape, log_prob.astype(x.dtype)]
