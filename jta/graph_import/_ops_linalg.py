"""Linear algebra, diagonal bands, ``Bitcast`` and ``Where`` for :data:`._ops.OPS`.

Decompositions and solves compute with ``jax.numpy``/``jax.lax.linalg`` (their results are never
static); the diagonal-band ops gather through index tables built in numpy from the static shapes,
``k`` and ``align``, so they stay numpy on numpy inputs, as the rest of the table does.

TensorFlow's kernels differ from LAPACK's conventions in a few places, followed here:

* ``Cholesky`` and ``SelfAdjointEigV2`` read only the lower triangle (Eigen's ``LLT`` and
  ``SelfAdjointEigenSolver``): the input is rebuilt as a Hermitian matrix from its lower triangle
  first, so values are TensorFlow's; ``jax.grad`` follows TensorFlow's gradients too (symmetric for
  ``Cholesky``, lower-triangular for ``SelfAdjointEigV2``). A matrix that is not positive definite
  gives NaN where TensorFlow raises (a traced function cannot raise on values).
* ``Svd`` returns ``(s, u, v)``, not ``v^H``; ``MatrixTriangularSolve`` broadcasts batch dimensions,
  ``MatrixSolve`` does not (TensorFlow's ``LinearAlgebraOp`` wants the same ones). A right-hand side that
  does not fit its matrix raises TensorFlow's ``InvalidArgumentError`` with its kernel's text while
  tracing (shapes are static in JAX), not JAX's "inconsistent size for core dimension".
* ``Eig`` gives LAPACK's order of the eigenvalues, which is not Eigen's (TensorFlow's kernel), and
  eigenvectors of unit norm whose phases may differ from TensorFlow's; ``Svd`` and
  ``SelfAdjointEigV2`` vectors may differ in sign (phase). Quantities that do not depend on these
  choices (reconstructions, ``|v|``, symmetric functions of the eigenvalues) and their gradients
  match TensorFlow's.
* ``MatrixSquareRoot`` is JAX's complex Schur method (CPU only, as JAX's ``sqrtm`` is); of a real matrix
  the real part, and NaN everywhere where Eigen's real Schur method (TensorFlow's kernel) meets a
  negative real eigenvalue. Its derivative solves TensorFlow's Sylvester system of Kronecker products.
* ``Bitcast`` rereads the bytes with ``jax.lax.bitcast_convert_type``; a 64-bit type needs
  ``jax_enable_x64`` (JAX would hold it narrower, so its bytes would not be TensorFlow's).
* ``Where``'s output shape is the number of true entries: it runs on constants and on concrete
  (eager) inputs; under ``jit`` it raises ``GraphError.NOT_STATIC`` naming the node.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from .._delivery import value_ops
from . import _ops_checks
from ._messages import GraphError
from ._nodes import Node
from ._ops import OPS, as_numpy, is_static, learned_size, registrar, result_dtype, static_value, xp_of
from ._ops_checks import known_now

_reg = registrar(OPS)


def _adjoint(x: Any) -> Any:
    return jnp.conj(jnp.swapaxes(x, -1, -2))


def _hermitian_from_lower(x: Any, hermitian_tangent: bool = False) -> Any:
    """The Hermitian matrix whose lower triangle is ``x``'s (its strict upper triangle is ignored).

    With ``hermitian_tangent``, the value is that, but the derivative is the Hermitian part's
    ``(x + x^H) / 2``: TensorFlow's Cholesky gradient is symmetric, the gradient of a symmetric
    input, not the lower-triangular derivative of what the kernel reads."""
    x = jnp.asarray(x)
    lower = jnp.tril(x, -1)
    real = jnp.real(x) if jnp.iscomplexobj(x) else x  # a Hermitian diagonal is real
    h = lower + _adjoint(lower) + (real * jnp.eye(x.shape[-1], dtype=real.dtype)).astype(x.dtype)
    if not hermitian_tangent:
        return h
    s = (x + _adjoint(x)) / 2
    return jax.lax.stop_gradient(h) + (s - jax.lax.stop_gradient(s))


def _batch(a: Any, b: Any) -> tuple[Any, Any]:
    """``a`` (``[..., M, M]``) and ``b`` (``[..., M, K]``) broadcast to one batch shape."""
    batch = np.broadcast_shapes(np.shape(a)[:-2], np.shape(b)[:-2])
    return (jnp.broadcast_to(a, batch + np.shape(a)[-2:]), jnp.broadcast_to(b, batch + np.shape(b)[-2:]))


# -- decompositions, solves, inverses, determinants -------------------------------------------
@_reg("Cholesky")
def _cholesky(node: Node, args: list[Any]) -> list[Any]:
    return [jax.lax.linalg.cholesky(_hermitian_from_lower(args[0], hermitian_tangent=True), symmetrize_input=False)]


def _triangular_shapes(node: Node, a: tuple[int, ...], b: tuple[int, ...], lower: bool, adjoint: bool) -> None:
    """``MatrixTriangularSolve``'s checks (``matrix_triangular_solve_op_impl.h``), in its order: ranks,
    a square matrix, batch dimensions that broadcast, as many rows in ``b`` as ``A`` has columns (also
    ``tf.linalg.cholesky_solve``'s, which is two of these solves). Shapes are static: decided while tracing."""
    _ops_checks.matrix_ranks(node, a, b)
    if a[-1] != a[-2]:
        _ops_checks.invalid(node, f"In[0] matrices in the last dimensions must be square ({a[-1]} =/= {a[-2]})")
    _ops_checks.matrix_batches(node, a, b)
    if a[-1] != b[-2]:
        _ops_checks.invalid(node, f"In[0] mismatch In[1] shape: {a[-1]} vs. {b[-2]}: {_ops_checks.shape_text(a)} "
                                  f"{_ops_checks.shape_text(b)} {int(lower)} {int(adjoint)}")


@_reg("MatrixTriangularSolve")
def _triangular_solve(node: Node, args: list[Any]) -> list[Any]:
    """Solves ``A x = b`` (``A^H x = b`` with ``adjoint``) reading only ``A``'s lower (upper) triangle."""
    adjoint, lower = bool(node.attr("adjoint", False)), bool(node.attr("lower", True))
    _triangular_shapes(node, np.shape(args[0]), np.shape(args[1]), lower, adjoint)
    a, b = _batch(*args)
    return [jax.lax.linalg.triangular_solve(a, b, left_side=True, lower=lower, transpose_a=adjoint,
                                            conjugate_a=adjoint)]


def _invertible(node: Node, a: Any, what: str) -> None:
    """TensorFlow's check before a solve or an inverse: no pivot of ``a``'s LU decomposition is 0
    (``{what} is not invertible.``, code 480; JAX gives infinities and NaN). (XLA computes the LU
    once for the check and the solve.)"""
    if np.size(a):
        lu = jax.lax.linalg.lu(jax.lax.stop_gradient(jnp.asarray(a)))[0]
        pivots = jnp.abs(jnp.diagonal(lu, axis1=-2, axis2=-1))
        value_ops.report(node.name, jnp.any(pivots == 0), GraphError.NOT_INVERTIBLE, extra={"op": node.op, "what": what})


def _solver_shapes(node: Node, a: tuple[int, ...], b: tuple[int, ...]) -> None:
    """``MatrixSolve``'s checks (``LinearAlgebraOp::AnalyzeInputs`` and ``ValidateSquareSolver``), in its
    order: ``A`` of rank >= 2, ``b`` of the same rank and batch dimensions (no broadcasting), ``A`` square,
    as many rows in ``b`` as in ``A`` (JAX would say "inconsistent size for core dimension")."""
    if len(a) < 2:
        _ops_checks.invalid(node, f"Input tensor 0 must have rank >= 2, got {len(a)}")
    if len(b) != len(a):
        _ops_checks.invalid(node, "All input tensors must have the same rank.")
    if a[:-2] != b[:-2]:
        _ops_checks.invalid(node, "All input tensors must have the same outer dimensions.")
    if a[-1] != a[-2]:
        _ops_checks.invalid(node, "First input (lhs) must be a square matrix.")
    if a[-2] != b[-2]:
        _ops_checks.invalid(node, "Input matrix and rhs are incompatible.")


@_reg("MatrixSolve")
def _solve(node: Node, args: list[Any]) -> list[Any]:
    _solver_shapes(node, np.shape(args[0]), np.shape(args[1]))
    a, b = (jnp.asarray(x) for x in args)
    _invertible(node, a, "Input matrix")
    return [jnp.linalg.solve(_adjoint(a) if node.attr("adjoint", False) else a, b)]


@_reg("MatrixInverse")
def _inverse(node: Node, args: list[Any]) -> list[Any]:
    x = jnp.asarray(args[0])
    _invertible(node, x, "Input")
    return [jnp.linalg.inv(_adjoint(x) if node.attr("adjoint", False) else x)]


@_reg("MatrixDeterminant")
def _determinant(node: Node, args: list[Any]) -> list[Any]:
    return [jnp.linalg.det(jnp.asarray(args[0]))]


@_reg("LogMatrixDeterminant")
def _log_determinant(node: Node, args: list[Any]) -> list[Any]:
    """(sign, log|det|), both of the input's dtype (a complex sign has modulus 1)."""
    x = jnp.asarray(args[0])
    sign, log_abs = jnp.linalg.slogdet(x)
    return [sign.astype(x.dtype), log_abs.astype(x.dtype)]


@_reg("Qr")
def _qr(node: Node, args: list[Any]) -> list[Any]:
    q, r = jnp.linalg.qr(jnp.asarray(args[0]), mode="complete" if node.attr("full_matrices", False) else "reduced")
    return [q, r]


@_reg("Lu")
def _lu(node: Node, args: list[Any]) -> list[Any]:
    """``tf.linalg.lu``: ``L`` and ``U`` packed in one matrix, and the row permutation ``p`` with
    ``x[p] = L U`` (LAPACK's partial pivoting, as TensorFlow's Eigen kernel)."""
    lu, _, perm = jax.lax.linalg.lu(jnp.asarray(args[0]))
    return [lu, perm.astype(jax.dtypes.canonicalize_dtype(node.attr("output_idx_type", np.dtype("int32"))))]


@_reg("Svd")
def _svd(node: Node, args: list[Any]) -> list[Any]:
    """(s, u, v) with ``x = u diag(s) v^H``, ``s`` in the input's dtype (as the raw op gives it);
    without ``compute_uv``, ``u`` and ``v`` are empty scalars, as ``Session.run`` gives them."""
    x = jnp.asarray(args[0])
    full = bool(node.attr("full_matrices", False))
    if not node.attr("compute_uv", True):
        s = jnp.linalg.svd(x, compute_uv=False)
        return [s.astype(x.dtype), jnp.zeros((), x.dtype), jnp.zeros((), x.dtype)]
    u, s, vh = jnp.linalg.svd(x, full_matrices=full)
    return [s.astype(x.dtype), u, _adjoint(vh)]


@_reg("SelfAdjointEigV2")
def _eigh(node: Node, args: list[Any]) -> list[Any]:
    """(eigenvalues ascending, in the input's dtype; eigenvectors as columns) of the Hermitian matrix
    of the lower triangle; without ``compute_v`` the eigenvectors are an empty scalar, as
    ``Session.run`` gives them."""
    x = _hermitian_from_lower(args[0])
    v, w = jax.lax.linalg.eigh(x, lower=True, symmetrize_input=False)
    return [w.astype(x.dtype), v if node.attr("compute_v", True) else jnp.zeros((), x.dtype)]


@_reg("Eig")
def _eig(node: Node, args: list[Any]) -> list[Any]:
    """(eigenvalues, right eigenvectors of unit norm) in ``Tout``. Eigenvectors and their derivatives
    are defined up to a phase each; ``jax.grad`` assumes distinct eigenvalues, as TensorFlow's
    gradient does."""
    x = jnp.asarray(args[0])
    dtype = node.attr("Tout", np.result_type(x.dtype, np.complex64))
    compute_v = bool(node.attr("compute_v", True))
    out = jax.lax.linalg.eig(x, compute_left_eigenvectors=False, compute_right_eigenvectors=compute_v,
                             enable_eigvec_derivs=True)
    return [out[0].astype(dtype), out[1].astype(dtype) if compute_v else jnp.zeros((), dtype)]


# -- the matrix square root ----------------------------------------------------------------------
def _sqrtm_one(a: Any) -> Any:
    """The principal square root of one matrix: JAX's (complex Schur form). Of a real matrix, its real
    part, or NaN everywhere where the matrix has a negative real eigenvalue: Eigen's real Schur method
    (TensorFlow's kernel) takes ``sqrt`` of that 1x1 block and spreads its NaN through the back-transform."""
    if jnp.iscomplexobj(a):
        return jax.scipy.linalg.sqrtm(a).astype(a.dtype)
    root = jnp.real(jax.scipy.linalg.sqrtm(a)).astype(a.dtype)
    t = jax.lax.linalg.schur(a, compute_schur_vectors=False)[0]  # (real: 1x1 and 2x2 blocks on the diagonal)
    sub = jnp.abs(jnp.diagonal(t, -1)) > 0
    block = jnp.concatenate([sub, jnp.zeros(1, bool)]) | jnp.concatenate([jnp.zeros(1, bool), sub])
    negative = jnp.any(~block & (jnp.diagonal(t) < 0))
    return jnp.where(negative, jnp.asarray(jnp.nan, a.dtype), root)


@jax.custom_jvp
def _sqrtm(a: Any) -> Any:
    return jnp.vectorize(_sqrtm_one, signature="(n,n)->(n,n)")(a)


@_sqrtm.defjvp
def _sqrtm_jvp(primals: tuple[Any], tangents: tuple[Any]) -> tuple[Any, Any]:
    """TensorFlow's ``_MatrixSquareRootGrad``: ``dR`` solves the Sylvester equation ``R dR + dR R = dA``,
    as the linear system of Kronecker products (``kron(R, I) + kron(I, R^T)`` on ``vec(dR)``)."""
    (a,), (da,) = primals, tangents
    root = _sqrtm(a)
    n = a.shape[-1]
    eye = jnp.eye(n, dtype=a.dtype)

    def solve(r: Any, d: Any) -> Any:
        k = jnp.kron(r, eye) + jnp.kron(eye, r.T)
        return jnp.linalg.solve(k, d.reshape(n * n)).reshape(n, n)

    return root, jnp.vectorize(solve, signature="(n,n),(n,n)->(n,n)")(root, da)


@_reg("MatrixSquareRoot")
def _matrix_square_root(node: Node, args: list[Any]) -> list[Any]:
    """``tf.linalg.sqrtm``: the principal square roots of the (batch of) square matrices."""
    a = jnp.asarray(args[0])
    if a.ndim < 2:
        _ops_checks.invalid(node, f"Input tensor 0 must have rank >= 2, got {a.ndim}")
    if a.shape[-1] != a.shape[-2]:
        _ops_checks.invalid(node, "Input matrix must be square.")
    return [_sqrtm(a) if a.shape[-1] else a]


# -- diagonal bands ---------------------------------------------------------------------------
def _k(node: Node, k: Any) -> tuple[int, int]:
    return _ops_checks.diagonal_index(node, static_value(node, k, "k"))


def _diag_len(d: int, rows: int, cols: int) -> int:
    return min(cols - max(d, 0), rows + min(d, 0))


def _offset(d: int, rows: int, cols: int, width: int, align: str) -> int:
    """Where diagonal ``d`` starts in its row of the packed ``[diagonals, width]`` array: ``align``
    names the side superdiagonals (first) and subdiagonals (second) are packed against."""
    sup, sub = align.split("_")
    right = sup == "RIGHT" if d >= 0 else sub == "RIGHT"
    if d == 0:
        right = sup == "RIGHT" or sub == "RIGHT"
    return width - _diag_len(d, rows, cols) if right else 0


def _scatter_table(k: tuple[int, int], rows: int, cols: int, width: int, align: str) -> tuple[np.ndarray, ...]:
    """For each matrix entry, its flat index into the packed diagonals, and whether it is on one."""
    lo, hi = k
    m, n = np.meshgrid(np.arange(rows), np.arange(cols), indexing="ij")
    index, on = np.zeros((rows, cols), np.int64), np.zeros((rows, cols), bool)
    for d in range(lo, hi + 1):
        where = (n - m) == d
        index[where] = (hi - d) * width + (n[where] - max(d, 0)) + _offset(d, rows, cols, width, align)
        on |= where
    return index, on


def _gather_table(k: tuple[int, int], rows: int, cols: int, align: str) -> tuple[np.ndarray, ...]:
    """For each packed diagonal entry, the flat matrix index it reads, and whether it is in the matrix."""
    lo, hi = k
    width = max(0, min(rows + min(hi, 0), cols - max(lo, 0)))
    index, inside = np.zeros((hi - lo + 1, width), np.int64), np.zeros((hi - lo + 1, width), bool)
    for i, d in enumerate(range(hi, lo - 1, -1)):
        j = np.arange(width) - _offset(d, rows, cols, width, align)
        ok = (j >= 0) & (j < _diag_len(d, rows, cols))
        index[i] = np.where(ok, (j - min(d, 0)) * cols + j + max(d, 0), 0)
        inside[i] = ok
    return index, inside


def _take_flat(x: Any, index: np.ndarray) -> Any:
    """``x``'s two innermost dimensions, flattened, gathered at ``index`` (any shape)."""
    xp = xp_of(x)
    flat = xp.reshape(x, np.shape(x)[:-2] + (-1,))
    return xp.take(flat, index, axis=-1)


def _packed(diagonal: Any, k: tuple[int, int]) -> Any:
    """The diagonals as ``[..., diagonals, width]`` (one diagonal comes without its axis)."""
    return xp_of(diagonal).expand_dims(diagonal, -2) if k[0] == k[1] else diagonal


def _align(node: Node) -> str:
    # V1 and V2 have no align attribute: they pack every diagonal to the left
    return str(node.attr("align", "LEFT_LEFT"))


@_reg("MatrixDiagV3", "MatrixDiagV2", "MatrixDiag")
def _matrix_diag(node: Node, args: list[Any]) -> list[Any]:
    """A matrix (batch) with the given diagonals ``k[0]..k[1]`` and ``padding_value`` elsewhere; a
    ``num_rows``/``num_cols`` of -1 is the smallest that holds them (square when both are -1)."""
    diagonal = args[0]
    k = _k(node, args[1]) if len(args) > 1 else (0, 0)
    rows, cols = ((int(static_value(node, a, "num_rows and num_cols")) for a in args[2:4]) if len(args) > 2
                  else (-1, -1))
    padding = args[4] if len(args) > 4 else np.zeros((), result_dtype(diagonal))
    _ops_checks.diagonal_matrix(node, k, np.shape(diagonal), rows, cols)
    packed = _packed(diagonal, k)
    width = np.shape(packed)[-1]
    min_rows, min_cols = width - min(k[1], 0), width + max(k[0], 0)
    if rows == -1 and cols == -1:
        rows = cols = max(min_rows, min_cols)
    rows, cols = (min_rows if rows == -1 else rows), (min_cols if cols == -1 else cols)
    index, on = _scatter_table(k, rows, cols, width, _align(node))
    xp = xp_of(diagonal, padding)
    return [as_numpy(xp.where(on, _take_flat(packed, index), xp.asarray(padding).astype(result_dtype(diagonal))))]


@_reg("MatrixDiagPartV3", "MatrixDiagPartV2", "MatrixDiagPart")
def _matrix_diag_part(node: Node, args: list[Any]) -> list[Any]:
    """The diagonals ``k[0]..k[1]``, packed as ``align`` says and padded with ``padding_value``."""
    x = args[0]
    k = _k(node, args[1]) if len(args) > 1 else (0, 0)
    padding = args[2] if len(args) > 2 else np.zeros((), result_dtype(x))
    rows, cols = np.shape(x)[-2:]
    _ops_checks.diagonal_band(node, k, rows, cols)
    index, inside = _gather_table(k, rows, cols, _align(node))
    xp = xp_of(x, padding)
    out = xp.where(inside, _take_flat(x, index), xp.asarray(padding).astype(result_dtype(x)))
    return [as_numpy(out[..., 0, :] if k[0] == k[1] else out)]


@_reg("MatrixSetDiagV3", "MatrixSetDiagV2", "MatrixSetDiag")
def _matrix_set_diag(node: Node, args: list[Any]) -> list[Any]:
    """The input with its diagonals ``k[0]..k[1]`` replaced by the packed ``diagonal``."""
    x, diagonal = args[:2]
    k = _k(node, args[2]) if len(args) > 2 else (0, 0)
    rows, cols = np.shape(x)[-2:]
    _ops_checks.set_diagonals(node, k, np.shape(x), np.shape(diagonal))
    packed = _packed(diagonal, k)
    index, on = _scatter_table(k, rows, cols, np.shape(packed)[-1], _align(node))
    return [as_numpy(xp_of(x, diagonal).where(on, _take_flat(packed, index), x))]


# -- Bitcast and Where ------------------------------------------------------------------------
def _to_bytes(x: Any) -> Any:
    """``x``'s bytes as a trailing uint8 axis (complex: the real part's, then the imaginary part's)."""
    if jnp.iscomplexobj(x):
        parts = jnp.stack([jnp.real(x), jnp.imag(x)], -1)
        return jax.lax.bitcast_convert_type(parts, jnp.uint8).reshape(x.shape + (-1,))
    if x.dtype.itemsize == 1:
        return jax.lax.bitcast_convert_type(x, jnp.uint8)[..., None]
    return jax.lax.bitcast_convert_type(x, jnp.uint8)


def _from_bytes(b: Any, dtype: np.dtype) -> Any:
    """The inverse of :func:`_to_bytes`: a trailing axis of ``dtype.itemsize`` bytes to ``dtype``."""
    if np.issubdtype(dtype, np.complexfloating):
        part = np.dtype(f"float{dtype.itemsize * 4}")
        parts = jax.lax.bitcast_convert_type(b.reshape(b.shape[:-1] + (2, -1)), part)
        return jax.lax.complex(parts[..., 0], parts[..., 1])
    if dtype.itemsize == 1:
        return jax.lax.bitcast_convert_type(b[..., 0], dtype)
    return jax.lax.bitcast_convert_type(b, dtype)


@_reg("Bitcast")
def _bitcast(node: Node, args: list[Any]) -> list[Any]:
    """The input's bytes read as ``type``: a wider input gains a trailing axis of ``in/out`` elements,
    a narrower one loses its trailing axis, which must have ``out/in`` elements (TensorFlow's rule)."""
    (x,) = args
    dtype = np.dtype(node.attr("type"))
    if is_static(x):
        x = np.ascontiguousarray(x)
        if x.dtype.itemsize > dtype.itemsize:
            return [x.view(dtype).reshape(x.shape + (x.dtype.itemsize // dtype.itemsize,))]
        return [x.view(dtype).reshape(x.shape[:-1]) if x.dtype.itemsize < dtype.itemsize else x.view(dtype)]
    for t in (x.dtype, dtype):
        if jax.dtypes.canonicalize_dtype(t) != t:  # JAX holds it narrower: its bytes are not TensorFlow's
            GraphError.UNSUPPORTED.raise_(items=f"  - node {node.name} (Bitcast from {np.dtype(x.dtype).name} to "
                                           f"{dtype.name}): {np.dtype(t).name} needs jax_enable_x64")
    b = _to_bytes(x)
    size_in, size_out = np.dtype(x.dtype).itemsize, dtype.itemsize
    if size_in > size_out:
        return [_from_bytes(b.reshape(x.shape + (size_in // size_out, size_out)), dtype)]
    return [_from_bytes(b.reshape(x.shape[:-1] + (size_out,)) if size_in < size_out else b, dtype)]


@_reg("Where")
def _where(node: Node, args: list[Any]) -> list[Any]:
    """The coordinates (int64, ``[true count, rank]``) of the true (non-zero) entries, in row-major
    order. Its shape depends on the values: it runs on constants and on concrete (eager) inputs, and
    under ``jit`` it raises ``GraphError.NOT_STATIC``."""
    (x,) = args
    value = known_now(x)
    if value is None:
        # under jta.checked: as many rows as the count it learned (it compiles again when they differ)
        rows = learned_size(node, jnp.count_nonzero(x), "its input (the number of true entries is the output's "
                                                        "shape; jta.checked learns it at run time)", 0,
                            int(np.size(x)))
        coordinates = jnp.argwhere(x, size=rows).reshape(rows, jnp.ndim(x))
        return [coordinates.astype(jax.dtypes.canonicalize_dtype(np.int64))]
    return [np.argwhere(value).astype(np.int64).reshape(-1, value.ndim)]
