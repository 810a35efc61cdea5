"""Sparse ops of ``jta.import_function`` between dense inputs and outputs, against TensorFlow:
``tf.nn.embedding_lookup_sparse`` and ``safe_embedding_lookup_sparse`` (each combiner, with and without
weights), ``tf.sparse.from_dense``/``to_dense``, ``sparse_dense_matmul``, ``reduce_sum``, ``softmax``,
``reorder``, ``reshape``, ``fill_empty_rows`` and ``add`` of a dense tensor.

Each function runs eagerly and under ``jta.checked(jax.jit(...))`` (``from_dense``'s ``Where`` and the
rows the data decides are learned at run time; a bare ``jit`` refuses them, naming ``jta.checked``);
``jax.grad`` of a weighted sum matches the tape's, and the imported train step (the tape inside the
``tf.function``: ``SparseSegmentSumGrad``, ``SparseFillEmptyRowsGrad``, ``SparseDenseCwiseAdd``...) matches
TensorFlow's. Bad indices fail with TensorFlow's class and text, eagerly and from compiled code.
"""

from __future__ import annotations

import re
from typing import Any

import numpy as np
import pytest

tf = pytest.importorskip("tensorflow")

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402

import jta  # noqa: E402
from tests.helpers import budget  # noqa: E402
from tests.helpers.tf2_steps import op_types, tape_step  # noqa: E402

IDS = np.array([[1, 0, 2], [0, 0, 0], [3, 5, 0], [4, 4, 1]], np.int64)  # (0: no id; row 1 is empty)
W = np.array([[1.0, 0.0, 2.0], [0.0, 0.0, 0.0], [3.0, 0.5, 0.0], [-1.5, 0.25, 0.75]], np.float32)
EMB = np.linspace(-1.0, 1.0, 18, dtype=np.float32).reshape(6, 3)


def _spec(a: np.ndarray) -> Any:
    return tf.TensorSpec(a.shape, tf.as_dtype(a.dtype))


def _close(got: Any, want: Any, tol: float, what: str) -> None:
    leaves, ref = jax.tree_util.tree_leaves(got), [np.asarray(tf.convert_to_tensor(x)) for x in tf.nest.flatten(want)]
    assert len(leaves) == len(ref), what
    for a, b in zip(leaves, ref, strict=True):
        a = np.asarray(a)
        assert a.shape == b.shape, (what, a.shape, b.shape)
        np.testing.assert_allclose(a, b, rtol=tol, atol=tol, err_msg=what)


def _check(build: Any, *args: np.ndarray, wrt: tuple[int, ...] = (1,), variable: Any = None, tol: float = 1e-6,
           ops: tuple[str, ...] = (), quick: bool = False) -> None:
    """``build`` against TensorFlow eagerly and under ``jta.checked(jax.jit)``; ``jax.grad`` of a weighted sum
    of its output with respect to the float arguments ``wrt`` (and ``variable``) against the tape's, and the
    imported train step, whose graph holds the op types ``ops``. ``quick`` (the default runs, unless
    ``--long``): eagerly and the train step only (each run under ``jta.checked`` compiles once per size it
    learns)."""
    quick = quick and not budget.long_run()
    f = tf.function(build, input_signature=[_spec(a) for a in args])
    want = f(*args)
    fn, params = jta.import_function(f, *args)
    _close(fn(params, *args), want, tol, "eager")
    if not quick:
        _close(jta.checked(jax.jit(fn))(params, *args), want, tol, "jta.checked(jit)")
    weights = np.cos(np.arange(np.size(want), dtype=np.float32)).reshape(np.shape(want))

    def loss(*xs: Any) -> Any:
        return tf.reduce_sum(weights * build(*xs))

    watched = [tf.constant(args[k]) for k in wrt] + ([variable] if variable is not None else [])
    with tf.GradientTape() as tape:
        tape.watch(watched[:len(wrt)])
        value = loss(*[watched[wrt.index(k)] if k in wrt else a for k, a in enumerate(args)])
    tape_grads = [tf.convert_to_tensor(g) for g in tape.gradient(value, watched)]

    def jax_loss(p: Any, *xs: Any) -> Any:
        return jnp.sum(weights * fn(p, *xs))

    if not quick:
        got = jta.checked(jax.jit(jax.grad(jax_loss, argnums=(0, *(1 + k for k in wrt)))))(params, *args)
        _close([*got[1:], *([got[0][variable.name.split(":")[0]]] if variable is not None else [])], tape_grads,
               tol, "jax.grad")

    step = tape_step(loss, args, wrt, [variable] if variable is not None else [])
    found = op_types(step)
    assert set(ops) <= found, sorted(set(ops) - found)
    jax_step, step_params = jta.import_function(step, *args)
    _close(jta.checked(jax.jit(jax_step))(step_params, *args), step(*args), tol, "train step")


def _embedding(name: str) -> Any:
    return tf.Variable(EMB, name=name)


@pytest.mark.parametrize("combiner,weighted", [
    ("sum", False), *(pytest.param(c, w, marks=pytest.mark.long_only)
                      for c, w in (("mean", True), ("sqrtn", False), ("sum", True), ("mean", False), ("sqrtn", True)))])
def test_embedding_lookup_sparse(combiner: str, weighted: bool) -> None:
    """An embedding bag of ids with an empty row (``SparseSegment*``, or ``SegmentSum`` with weights), the
    gradient with respect to the embedding and the weights (``SparseSegment*Grad`` in the train step)."""
    emb = _embedding(f"emb_{combiner}_{weighted}")

    def bag(ids: Any, w: Any) -> Any:
        sp_w = tf.sparse.from_dense(w) if weighted else None
        return tf.nn.embedding_lookup_sparse(emb, tf.sparse.from_dense(ids), sp_w, combiner=combiner)

    grads = {"sum": ("SparseSegmentSumGrad",), "mean": ("SparseSegmentMeanGrad",), "sqrtn": ("SparseSegmentSqrtNGrad",)}
    _check(bag, IDS, W, wrt=(1,) if weighted else (), variable=emb, ops=() if weighted else grads[combiner],
           quick=True)


@pytest.mark.parametrize("combiner,weighted", [
    pytest.param(c, w, marks=pytest.mark.long_only) for c, w in (("mean", True), ("sqrtn", False), ("sum", True))])
def test_safe_embedding_lookup_sparse(combiner: str, weighted: bool) -> None:
    """``safe_embedding_lookup_sparse``: ``SparseReshape``, ``SparseFillEmptyRows`` (its empty rows learned
    under ``jta.checked``) and its gradient op in the train step."""
    emb = _embedding(f"safe_{combiner}_{weighted}")

    def bag(ids: Any, w: Any) -> Any:
        sp_w = tf.sparse.from_dense(w) if weighted else None
        return tf.nn.safe_embedding_lookup_sparse(emb, tf.sparse.from_dense(ids), sp_w, combiner=combiner)

    _check(bag, IDS, W, wrt=(1,) if weighted else (), variable=emb,
           ops=("SparseFillEmptyRowsGrad",) if weighted else ())


X = np.array([[1.0, 0.0, 2.0, 0.0], [0.0, 0.0, 0.0, 0.0], [3.0, 0.5, 0.0, -2.0]], np.float32)
B = np.linspace(-1.0, 2.0, 8, dtype=np.float32).reshape(4, 2)

CASES = {
    "to_dense": lambda x, b: tf.sparse.to_dense(tf.sparse.from_dense(x)) * 2.0,
    "matmul": lambda x, b: tf.sparse.sparse_dense_matmul(tf.sparse.from_dense(x), b),
    "matmul_adjoint": lambda x, b: tf.sparse.sparse_dense_matmul(tf.sparse.from_dense(tf.transpose(x)), b,
                                                                 adjoint_a=True),
    "reduce_sum": lambda x, b: tf.sparse.reduce_sum(tf.sparse.from_dense(x), axis=1),
    "reduce_sum_keepdims": lambda x, b: tf.sparse.reduce_sum(tf.sparse.from_dense(x), axis=0, keepdims=True),
    "softmax": lambda x, b: tf.sparse.to_dense(tf.sparse.softmax(tf.sparse.from_dense(x))),
    "reorder": lambda x, b: tf.sparse.to_dense(tf.sparse.reorder(tf.sparse.from_dense(x))),
    "reshape": lambda x, b: tf.sparse.to_dense(tf.sparse.reshape(tf.sparse.from_dense(x), [2, -1])),
    "fill_empty_rows": lambda x, b: tf.sparse.to_dense(tf.sparse.fill_empty_rows(tf.sparse.from_dense(x), 7.0)[0]),
    "add_dense": lambda x, b: tf.sparse.add(tf.sparse.from_dense(x), x * 3.0),
}
OPS = {"to_dense": ("SparseToDense",), "matmul": ("SparseTensorDenseMatMul",), "reduce_sum": ("SparseReduceSum",),
       "softmax": ("SparseSoftmax", "SparseDenseCwiseAdd"), "reorder": ("SparseReorder",),
       "reshape": ("SparseReshape",), "fill_empty_rows": ("SparseFillEmptyRowsGrad",),
       "add_dense": ("SparseTensorDenseAdd",)}
DEFAULT = ("matmul",)  # (the others: --long; fill_empty_rows learns two sizes, 6 s)


@pytest.mark.parametrize("name", [n if n in DEFAULT else pytest.param(n, marks=pytest.mark.long_only) for n in CASES])
def test_sparse_functions(name: str) -> None:
    _check(CASES[name], X, B, wrt=(0, 1) if "matmul" in name else (0,), tol=2e-6, ops=OPS.get(name, ()), quick=True)


def test_a_bare_jit_refuses_naming_checked() -> None:
    f = tf.function(CASES["to_dense"], input_signature=[_spec(X), _spec(B)])
    fn, params = jta.import_function(f, X, B)
    with pytest.raises(jta.errors.UnimplementedError, match="jta.checked"):
        jax.jit(fn)(params, X, B)


# -- TensorFlow's checks -------------------------------------------------------------------------------------
def _raw(op: str, spec: list[Any], **fixed: Any) -> Any:
    names = [n for n, _ in spec]
    return tf.function(lambda *xs: getattr(tf.raw_ops, op)(**dict(zip(names, xs, strict=True)), **fixed),
                       input_signature=[s for _, s in spec])


def _same_error(f: Any, *args: np.ndarray) -> None:
    """``f``'s error against the imported function's, eagerly and from compiled code (``jta.checked``)."""
    with pytest.raises(tf.errors.InvalidArgumentError) as want:
        f(*args)
    text = re.sub(r"^\{\{function_node [^}]*\}\}\s*", "", want.value.message).split(" [Op:")[0].split("\n\t")[0]
    text = text.strip()
    fn, params = jta.import_function(f, *(np.zeros_like(a) if a.dtype.kind == "f" else a for a in args))
    for run in (fn, jta.checked(jax.jit(fn))):
        with pytest.raises(jta.errors.InvalidArgumentError) as got:
            run(params, *args)
        assert str(got.value).split("): ", 1)[1].strip() == text, (str(got.value), text)


DATA = np.arange(12, dtype=np.float32).reshape(4, 3)
I32 = tf.TensorSpec([3], tf.int32)


SEGMENT_ERRORS = [([0, 7, 3], [0, 0, 2]), ([0, 1, 3], [1, 0, 2]), ([0, 1, 3], [-1, 0, 2]), ([0, 1, 3], [0, 0, -1]),
                  ([9, 0, 1], [0, 1, 0]), ([0, 9, 1], [1, 1, 0])]


@pytest.mark.parametrize("op,indices,segments", [
    (op, *case) if op == "SparseSegmentSum" and k in (0, 1, 4) else pytest.param(op, *case, marks=pytest.mark.long_only)
    for op in ("SparseSegmentSum", "SparseSegmentMean", "SparseSegmentSqrtN") for k, case in enumerate(SEGMENT_ERRORS)])
def test_sparse_segment_errors(op: str, indices: list[int], segments: list[int]) -> None:
    """Out-of-range ids, unsorted and negative segment ids: TensorFlow's kernel checks segment by segment
    (order, then range, then the segment's indices), after the last id's sign."""
    f = _raw(op, [("data", _spec(DATA)), ("indices", I32), ("segment_ids", I32)])
    _same_error(f, DATA, np.int32(indices), np.int32(segments))


@pytest.mark.long_only
def test_sparse_segment_with_num_segments_and_grad_errors() -> None:
    f = _raw("SparseSegmentSumWithNumSegments", [("data", _spec(DATA)), ("indices", I32), ("segment_ids", I32)],
             num_segments=4)
    _same_error(f, DATA, np.int32([0, 1, 3]), np.int32([0, 0, 4]))
    _same_error(f, DATA, np.int32([0, 1, 3]), np.int32([2, 0, 1]))
    grad = np.ones((3, 3), np.float32)
    for op in ("SparseSegmentSumGrad", "SparseSegmentMeanGrad"):
        g = _raw(op, [("grad", tf.TensorSpec([3, 3], tf.float32)), ("indices", I32), ("segment_ids", I32)],
                 output_dim0=5)
        for indices, segments in (([0, 9, 1], [0, 1, 7]), ([0, 1, 1], [7, 0, 1]), ([0, 9, 1], [0, 1, -1])):
            _same_error(g, grad, np.int32(indices), np.int32(segments))


@pytest.mark.parametrize("indices", [[[0, 1], [2, 0]], [[1, 0], [0, 1]],
                                     *(pytest.param(i, marks=pytest.mark.long_only) for i in ([[0, 1], [0, 1]],
                                                                                          [[0, -1], [1, 0]]))])
def test_sparse_to_dense_errors(indices: list[list[int]]) -> None:
    f = _raw("SparseToDense", [("sparse_indices", tf.TensorSpec([2, 2], tf.int64)),
                               ("sparse_values", tf.TensorSpec([2], tf.float32))],
             output_shape=[2, 2], default_value=0.0)
    _same_error(f, np.int64(indices), np.float32([1.0, 2.0]))


def test_index_errors_of_the_other_ops() -> None:
    idx = tf.TensorSpec([2, 2], tf.int64)
    vals = tf.TensorSpec([2], tf.float32)
    mm = _raw("SparseTensorDenseMatMul", [("a_indices", idx), ("a_values", vals)], a_shape=[3, 2], b=tf.ones([2, 4]))
    _same_error(mm, np.int64([[0, 1], [3, 0]]), np.float32([1, 2]))
    _same_error(mm, np.int64([[5, 5], [0, 0]]), np.float32([1, 2]))
    add = _raw("SparseTensorDenseAdd", [("a_indices", idx), ("a_values", vals)], a_shape=[2, 2], b=tf.ones([2, 2]))
    _same_error(add, np.int64([[0, 1], [2, 1]]), np.float32([1, 2]))
    fill = _raw("SparseFillEmptyRows", [("indices", idx), ("values", vals)], dense_shape=[4, 2], default_value=7.0)
    _same_error(fill, np.int64([[0, 1], [4, 0]]), np.float32([1, 2]))
    invert = _raw("InvertPermutation", [("x", I32)])  # (of a run-time permutation: SparseReorder's gradient)
    _same_error(invert, np.int32([0, 3, 1]))
    _same_error(invert, np.int32([1, 0, 1]))
    fn, params = jta.import_function(invert, np.int32([2, 0, 1]))
    np.testing.assert_array_equal(jax.jit(fn)(params, np.int32([2, 0, 1])), [1, 2, 0])


def test_raw_ops_of_indices_given_as_arguments() -> None:
    """The ops of indices that are arguments (no size to learn: a bare ``jit``): ``WithNumSegments`` (with an
    empty segment and more than 10 entries in one, where a mean divides), ``SparseDenseCwise{Mul,Div}``,
    ``SparseToDense`` without validation (a repeated index: the last value), ``SparseReduceSum`` over two
    axes, and ``SparseReorder``/``SparseSoftmax`` of unsorted indices (the softmax's values in sorted order)."""
    data = np.linspace(-2.0, 3.0, 36, dtype=np.float32).reshape(12, 3)
    ids = np.array([0] * 11 + [2], np.int32)
    idx = np.array([[1, 1, 0], [0, 2, 1], [0, 0, 1], [1, 0, 0]], np.int64)
    vals = np.array([1.5, -2.0, 0.25, 3.0], np.float32)
    dense = np.array([[2.0], [-4.0]], np.float32)

    def program(data: Any, ids: Any, idx: Any, vals: Any, dense: Any) -> Any:
        raw, shape = tf.raw_ops, tf.constant([2, 3, 2], tf.int64)
        idx2 = idx[:, 1:]
        out = [raw.SparseSegmentSumWithNumSegments(data=data, indices=tf.range(12), segment_ids=ids, num_segments=4),
               raw.SparseSegmentMeanWithNumSegments(data=data, indices=tf.range(12), segment_ids=ids,
                                                    num_segments=3),
               raw.SparseSegmentSqrtNWithNumSegments(data=data, indices=tf.range(11, -1, -1), segment_ids=ids,
                                                     num_segments=3),
               raw.SparseDenseCwiseMul(sp_indices=idx2, sp_values=vals, sp_shape=[3, 2], dense=dense[:, 0][:2]),
               raw.SparseDenseCwiseDiv(sp_indices=idx, sp_values=vals, sp_shape=shape, dense=tf.reshape(dense, [2, 1, 1])),
               raw.SparseToDense(sparse_indices=idx2, output_shape=[3, 2], sparse_values=vals, default_value=-1.0,
                                 validate_indices=False),
               raw.SparseReduceSum(input_indices=idx, input_values=vals, input_shape=shape, reduction_axes=[0, -1]),
               raw.SparseReorder(input_indices=idx, input_values=vals, input_shape=shape).output_values,
               raw.SparseSoftmax(sp_indices=idx, sp_values=vals, sp_shape=shape)]
        return [tf.reshape(o, [-1]) for o in out]

    args = (data, ids, idx, vals, dense)
    f = tf.function(program, input_signature=[_spec(a) for a in args])
    fn, params = jta.import_function(f, *args)
    for run in (fn, jax.jit(fn)):
        _close(run(params, *args), f(*args), 1e-6, "raw ops")
    grad = jax.jit(jax.grad(lambda d, v, y: sum(jnp.sum(jnp.sin(o)) for o in fn(params, d, ids, idx, v, y)),
                            argnums=(0, 1, 2)))(data, vals, dense)
    watched = [tf.constant(a) for a in (data, vals, dense)]
    with tf.GradientTape() as tape:
        tape.watch(watched)
        loss = tf.add_n([tf.reduce_sum(tf.sin(o)) for o in program(watched[0], ids, idx, *watched[1:])])
    _close(list(grad), tape.gradient(loss, watched), 1e-5, "jax.grad")


@pytest.mark.long_only
@pytest.mark.parametrize("name", ["segment_sum", "segment_mean", "segment_sqrt_n"])
def test_sparse_gradient_v2_in_a_train_step(name: str) -> None:
    """``tf.sparse.segment_*(..., sparse_gradient=True)``: the tape's gradient is ``SparseSegment*GradV2``'s
    rows of the distinct indices (their count learned under ``jta.checked``), made dense."""
    data = np.linspace(-1.0, 1.0, 15, dtype=np.float32).reshape(5, 3)
    idx, seg = np.array([3, 1, 3, 0], np.int32), np.array([0, 0, 1, 3], np.int32)
    reduce = getattr(tf.sparse, name)

    @tf.function(input_signature=[_spec(data), _spec(idx), _spec(seg)])
    def step(d: Any, i: Any, s: Any) -> Any:
        with tf.GradientTape() as tape:
            tape.watch(d)
            value = tf.reduce_sum(tf.sin(reduce(d, i, s, sparse_gradient=True)))
        return value, tf.convert_to_tensor(tape.gradient(value, d))

    fn, params = jta.import_function(step, data, idx, seg)
    _close(fn(params, data, idx, seg), step(data, idx, seg), 1e-6, "eager")
    _close(jta.checked(jax.jit(fn))(params, data, idx, seg), step(data, idx, seg), 1e-6, "jta.checked(jit)")


def test_a_reduction_of_an_entry_outside_the_dense_shape_is_tensorflows_internal_error():
    """``SparseReduceSum`` of an index past the dense shape: TensorFlow's ``InternalError`` and text, eagerly
    and from compiled code."""
    shape = np.array([2, 3], np.int64)
    values = np.array([1.0, 2.0], np.float32)
    f = tf.function(lambda i: tf.raw_ops.SparseReduceSum(input_indices=i, input_values=values, input_shape=shape,
                                                        reduction_axes=[1]),
                    input_signature=[tf.TensorSpec([2, 2], tf.int64)])
    bad = np.array([[0, 1], [5, 0]], np.int64)
    with pytest.raises(tf.errors.InternalError, match="Obtained a write index of 5 which is outside of bounds"):
        f(bad)
    fn, params = jta.import_function(f, bad)
    for run in (fn, jta.checked(jax.jit(fn))):
        with pytest.raises(jta.errors.InternalError, match=r"Obtained a write index of 5 which is outside of "
                                                            r"bounds of \[0, 2\)"):
            run(params, bad)
