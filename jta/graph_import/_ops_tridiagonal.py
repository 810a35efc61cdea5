"""Tridiagonal systems: ``TridiagonalSolve`` (``tf.linalg.tridiagonal_solve``, whose ``sequence`` and
``matrix`` formats the Python wrapper turns into the op's ``compact`` one) and ``TridiagonalMatMul``
(``tf.linalg.tridiagonal_matmul``), computed as TensorFlow's CPU kernels (``tridiagonal_solve_op.cc``,
``tridiagonal_matmul_op.cc``) compute them.

``diagonals`` is ``[..., 3, m]``: the superdiagonal (its last entry ignored), the diagonal and the
subdiagonal (its first entry ignored); ``rhs`` is ``[..., m, k]`` with the same batch dimensions (the
kernels do not broadcast). The solve follows the kernel's three algorithms row by row, in a
:func:`jax.lax.scan` (``jax.lax.linalg.tridiagonal_solve`` has no pivoting, so its values differ where
pivoting matters):

- ``partial_pivoting`` (the default): Gaussian elimination with row interchanges (LAPACK's ``dgtsv``);
- without it, the Thomas algorithm;
- ``perturb_singular`` (with pivoting): LAPACK's ``xLAGTF``/``xLAGTS``, whose tiny pivots are perturbed
  (``MaybePerturbPivot``) instead of failing.

A singular system is no error in TensorFlow: the kernel logs a warning and fills that matrix's solution
with NaN (a zero pivot; ``perturb_singular`` gives huge finite values instead). Each product and sum is
the kernel's, in its order, so values agree with TensorFlow's within a few ulp (XLA may fuse a product
into the sum that reads it).

The derivative is TensorFlow's registered gradient (``linalg_grad.py``): the cotangent solved with the
transposed diagonals by the same algorithm, and minus the three diagonals of its product with the
solution; ``TridiagonalMatMul``'s is the derivative of its products, which JAX computes.
"""

from __future__ import annotations

import functools
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from ._nodes import Node
from ._ops import OPS, registrar
from ._ops_checks import invalid

_reg = registrar(OPS)


def _batch_shapes(node: Node, shapes: list[tuple[int, ...]]) -> None:
    """``LinearAlgebraOp``'s checks: each input of rank 2 or more, all of one rank and batch shape."""
    for k, shape in enumerate(shapes):
        if len(shape) < 2:
            invalid(node, f"Input tensor {k} must have rank >= 2, got {len(shape)}")
    if len({len(s) for s in shapes}) > 1:
        invalid(node, "All input tensors must have the same rank.")
    if len({s[:-2] for s in shapes}) > 1:
        invalid(node, "All input tensors must have the same outer dimensions.")


@_reg("TridiagonalMatMul")
def _tridiagonal_matmul(node: Node, args: list[Any]) -> list[Any]:
    """``rhs`` times the tridiagonal matrix of ``superdiag``, ``maindiag``, ``subdiag`` (each ``[..., 1, m]``):
    row ``i`` is ``maindiag[i] rhs[i] + subdiag[i] rhs[i-1] + superdiag[i] rhs[i+1]``, added in that order."""
    sup, main, sub, rhs = (jnp.asarray(a) for a in args)
    _batch_shapes(node, [a.shape for a in (sup, main, sub, rhs)])
    m = rhs.shape[-2]
    for a, what in ((sup, "superdiagonal"), (main, "main diagonal"), (sub, "subdiagonal")):
        if a.shape[-2:] != (1, m):
            invalid(node, f"Invalid {what} shape.")
    sup, main, sub = (jnp.swapaxes(a, -1, -2) for a in (sup, main, sub))  # [..., m, 1]
    out = rhs * main
    if m > 1:
        out = out.at[..., 1:, :].add(rhs[..., :-1, :] * sub[..., 1:, :])
        out = out.at[..., :-1, :].add(rhs[..., 1:, :] * sup[..., :-1, :])
    return [out]


# -- the three solvers, of one system: diagonals [3, m], rhs [m, k] (m >= 2) ----------------------------------
def _thomas(sup: Any, diag: Any, sub: Any, rhs: Any) -> tuple[Any, Any]:
    """``SolveWithThomasAlgorithm``: the solution, and whether a pivot was zero (then NaN)."""
    def down(carry: Any, row: Any) -> Any:
        u_prev, x_prev = carry
        d, s, b, r = row
        denom = d - s * u_prev
        u, x = b / denom, (r - s * x_prev) / denom
        return (u, x), (u, x, denom == 0)

    u0, x0 = sup[0] / diag[0], rhs[0] / diag[0]
    _, (u, x, zero) = jax.lax.scan(down, (u0, x0), (diag[1:], sub[1:], sup[1:], rhs[1:]))
    u, x = jnp.concatenate([u0[None], u]), jnp.concatenate([x0[None], x])

    def up(x_next: Any, row: Any) -> Any:
        ui, xi = row
        xi = xi - ui * x_next
        return xi, xi

    last = x[-1]
    _, rest = jax.lax.scan(up, last, (u[:-1], x[:-1]), reverse=True)
    return jnp.concatenate([rest, last[None]]), (diag[0] == 0) | jnp.any(zero)


def _eliminate(sup: Any, diag: Any, sub: Any, rhs: Any) -> tuple[Any, Any, Any, Any, Any, Any]:
    """The row-pivoted elimination of ``SolveWithGaussianEliminationWithPivoting``: U's three diagonals,
    the forward-solved right-hand sides, and whether a pivot was zero where no rows were interchanged."""
    m = diag.shape[0]

    def step(carry: Any, row: Any) -> Any:
        u0, u1, xi = carry
        i, s, d, b, r = row
        not_last = i != m - 2
        keep = jnp.abs(u0) >= jnp.abs(s)
        f_keep, f_swap = s / u0, u0 / s
        next_u0 = jnp.where(keep, d - f_keep * u1, u1 - f_swap * d)
        next_x = jnp.where(keep, r - f_keep * xi, xi - f_swap * r)
        next_u1 = jnp.where(not_last, jnp.where(keep, b, -f_swap * b), u1)
        out = (jnp.where(keep, u0, s), jnp.where(keep, u1, d),
               jnp.where(not_last & ~keep, b, jnp.zeros_like(b)), jnp.where(keep, xi, r), keep & (u0 == 0))
        return (next_u0, next_u1, next_x), out

    rows = (jnp.arange(m - 1), sub[1:], diag[1:], sup[1:], rhs[1:])
    (u0, _, x_last), (c0, c1, c2, x, zero) = jax.lax.scan(step, (diag[0], sup[0], rhs[0]), rows)
    return jnp.concatenate([c0, u0[None]]), c1, c2, x, x_last, jnp.any(zero) | (u0 == 0)


def _pivoting(sup: Any, diag: Any, sub: Any, rhs: Any) -> tuple[Any, Any]:
    """``SolveWithGaussianEliminationWithPivoting``: the solution, and whether the matrix was singular."""
    u0, u1, u2, x, x_last, singular = _eliminate(sup, diag, sub, rhs)
    last = x_last / u0[-1]
    second = (x[-1] - u1[-1] * last) / u0[-2]

    def up(carry: Any, row: Any) -> Any:
        x1, x2 = carry
        a, b, c, xi = row
        xi = (xi - b * x1 - c * x2) / a
        return (xi, x1), xi

    _, rest = jax.lax.scan(up, (second, last), (u0[:-2], u1[:-1], u2[:-1], x[:-1]), reverse=True)
    return jnp.concatenate([rest, second[None], last[None]]), singular


def _perturbed_pivot(perturb: Any, pivot: Any, row: Any) -> tuple[Any, Any]:
    """``MaybePerturbPivot`` (from LAPACK's ``xLAGTS``): a pivot under 1 in magnitude made large enough
    that neither ``row / pivot`` nor ``1 / pivot`` overflows (moved away from 0 by ``perturb``, doubled
    each time, or ``pivot`` and ``row`` scaled up together)."""
    real = jnp.real(pivot).dtype
    safemin = jnp.asarray(np.finfo(real).tiny, real)  # (1 / max is below it: xLAMCH's sfmin)
    bignum = 1 / safemin
    perturb = jnp.copysign(jnp.maximum(jnp.abs(perturb), safemin), jnp.real(pivot))
    max_factor = jnp.max(jnp.abs(row), initial=0)

    def more(state: Any) -> Any:
        pivot, _, _, stop = state
        return (jnp.abs(pivot) < 1) & ~stop

    def once(state: Any) -> Any:
        pivot, row, perturb, _ = state
        a = jnp.abs(pivot)
        tiny = a < safemin
        add = jnp.where(tiny, (a == 0) | (max_factor * safemin > a), max_factor > a * bignum)
        scale = tiny & ~add
        pivot = jnp.where(add, pivot + perturb, jnp.where(scale, pivot * bignum, pivot))
        row = jnp.where(scale, row * bignum, row)
        return pivot, row, jnp.where(add, perturb * 2, perturb), ~add

    pivot, row, _, _ = jax.lax.while_loop(more, once, (pivot, row, perturb, jnp.asarray(False)))
    return pivot, row


def _perturbing(sup: Any, diag: Any, sub: Any, rhs: Any) -> tuple[Any, Any]:
    """``SolveWithGaussianEliminationWithPivotingAndPerturbSingular``: LAPACK's ``xLAGTF`` elimination
    (pivoting by scaled magnitudes), then the back substitution with perturbed tiny pivots. Never NaN for
    a zero pivot, so nothing is reported singular."""
    m, eps = diag.shape[0], jnp.finfo(jnp.real(diag).dtype).eps
    absolute = jnp.abs

    def step(carry: Any, row: Any) -> Any:
        u0, u1, xi, scale1, top = carry
        k, s, d, b, r = row
        not_last = k < m - 2
        scale2 = absolute(s) + absolute(d) + jnp.where(not_last, absolute(b), 0)
        piv1 = jnp.where(u0 == 0, 0, absolute(u0) / scale1)
        swap = (s != 0) & ~(absolute(s) / scale2 <= piv1)  # (the kernel's test: NaN interchanges)
        f_keep, f_swap = s / u0, u0 / s
        out_u0, out_u1 = jnp.where(swap, s, u0), jnp.where(swap, d, u1)
        out_u2 = jnp.where(swap & not_last, b, jnp.zeros_like(b))
        next_u0 = jnp.where(swap, u1 - f_swap * d, jnp.where(s == 0, d, d - f_keep * u1))
        next_u1 = jnp.where(swap, jnp.where(not_last, -f_swap * b, u1), b)
        next_x = jnp.where(swap, xi - f_swap * r, jnp.where(s == 0, r, r - f_keep * xi))
        out_x = jnp.where(swap, r, xi)
        top = jnp.where(not_last, jnp.maximum(top, jnp.max(absolute(jnp.stack([out_u0, out_u1, out_u2])))), top)
        return (next_u0, next_u1, next_x, jnp.where(swap, scale1, scale2), top), (out_u0, out_u1, out_u2, out_x)

    start = (diag[0], sup[0], rhs[0], absolute(diag[0]) + absolute(sup[0]),
             jnp.maximum(absolute(diag[0]), absolute(sup[0])))
    rows = (jnp.arange(m - 1), sub[1:], diag[1:], sup[1:], rhs[1:])
    (last_u0, _, x_last, _, top), (u0, u1, u2, x) = jax.lax.scan(step, start, rows)
    tol = eps * jnp.maximum(top, absolute(last_u0))

    def solved(perturb: Any, pivot: Any, row: Any) -> Any:
        pivot, row = _perturbed_pivot(perturb, pivot, row)
        return row * (1 / pivot)

    last = solved(tol, last_u0, x_last)
    second = solved(jnp.copysign(tol, jnp.real(u0[-1])), u0[-1], x[-1] - u1[-1] * last)

    def up(carry: Any, row: Any) -> Any:
        x1, x2 = carry
        a, b, c, xi = row
        xi = solved(jnp.copysign(tol, jnp.real(a)), a, xi - b * x1 - c * x2)
        return (xi, x1), xi

    _, rest = jax.lax.scan(up, (second, last), (u0[:-1], u1[:-1], u2[:-1], x[:-1]), reverse=True)
    return jnp.concatenate([rest, second[None], last[None]]), jnp.asarray(False)


def _solve_one(diagonals: Any, rhs: Any, pivoting: bool, perturb: bool) -> Any:
    """One system's solution by the kernel's algorithm (NaN where it reports the matrix singular)."""
    sup, diag, sub = diagonals[0], diagonals[1], diagonals[2]
    m = diag.shape[0]
    if m == 0:
        return rhs
    if perturb:
        if m == 1:
            pivot, row = _perturbed_pivot(jnp.finfo(jnp.real(diag).dtype).eps * jnp.abs(diag[0]), diag[0], rhs[0])
            return (row * (1 / pivot))[None]
        x, singular = _perturbing(sup, diag, sub, rhs)
    elif m == 1:
        x, singular = rhs / diag[0], diag[0] == 0
    else:
        x, singular = (_pivoting if pivoting else _thomas)(sup, diag, sub, rhs)
    return jnp.where(singular, jnp.full_like(x, jnp.nan), x)


def _solve_batch(diagonals: Any, rhs: Any, pivoting: bool, perturb: bool) -> Any:
    batch, count = diagonals.shape[:-2], int(np.prod(diagonals.shape[:-2]))
    if count == 0 or diagonals.shape[-1] == 0:  # (no systems, or no equations: an empty solution)
        return rhs
    flat_d = diagonals.reshape((count, *diagonals.shape[-2:]))
    flat_r = rhs.reshape((count, *rhs.shape[-2:]))
    out = jax.vmap(lambda d, r: _solve_one(d, r, pivoting, perturb))(flat_d, flat_r)
    return out.reshape((*batch, *rhs.shape[-2:]))


@functools.partial(jax.custom_vjp, nondiff_argnums=(2, 3))
def _solve(diagonals: Any, rhs: Any, pivoting: bool, perturb: bool) -> Any:
    return _solve_batch(diagonals, rhs, pivoting, perturb)


def _solve_fwd(diagonals: Any, rhs: Any, pivoting: bool, perturb: bool) -> tuple[Any, Any]:
    x = _solve(diagonals, rhs, pivoting, perturb)
    return x, (diagonals, x)


def _shifted(a: Any, by: int) -> Any:
    """``a`` moved ``by`` places along its next-to-last axis (-1: up), zeros coming in."""
    pad = [(0, 0)] * a.ndim
    pad[-2] = (max(by, 0), max(-by, 0))
    moved = jnp.pad(a, pad)
    return moved[..., :a.shape[-2], :] if by > 0 else moved[..., -by:, :]


def _solve_bwd(pivoting: bool, perturb: bool, saved: Any, g: Any) -> tuple[Any, Any]:
    """``_TridiagonalSolveGrad``: ``g`` solved with the transposed diagonals (by the same algorithm),
    and minus the three diagonals of that times the solution's transpose."""
    diagonals, x = saved
    if diagonals.shape[-1] == 0:  # (no equations: nothing to differentiate)
        return jnp.zeros_like(diagonals), jnp.zeros_like(g)
    zeros = jnp.zeros((*diagonals.shape[:-2], 1), diagonals.dtype)
    transposed = jnp.stack([jnp.concatenate([diagonals[..., 2, 1:], zeros], -1), diagonals[..., 1, :],
                            jnp.concatenate([zeros, diagonals[..., 0, :-1]], -1)], -2)
    grad_rhs = _solve(transposed, g, pivoting, perturb)
    grad_diags = jnp.stack([jnp.sum(grad_rhs * _shifted(x, -1), -1), jnp.sum(grad_rhs * x, -1),
                            jnp.sum(grad_rhs * _shifted(x, 1), -1)], -2)
    return -grad_diags, grad_rhs


_solve.defvjp(_solve_fwd, _solve_bwd)


@_reg("TridiagonalSolve")
def _tridiagonal_solve(node: Node, args: list[Any]) -> list[Any]:
    """The solution of the tridiagonal systems ``diagonals`` (``[..., 3, m]``, compact) ``x = rhs``."""
    diagonals, rhs = (jnp.asarray(a) for a in args)
    pivoting, perturb = bool(node.attr("partial_pivoting", True)), bool(node.attr("perturb_singular", False))
    if perturb and not pivoting:
        invalid(node, "Setting perturb_singular requires also setting partial_pivoting.")
    _batch_shapes(node, [diagonals.shape, rhs.shape])
    if diagonals.shape[-2] != 3:
        invalid(node, f"Expected diagonals to be provided as a matrix with 3 rows, got {diagonals.shape[-2]} rows.")
    if diagonals.shape[-1] != rhs.shape[-2]:
        invalid(node, "Expected the same number of left-hand sides and right-hand sides, got "
                      f"{diagonals.shape[-1]} and {rhs.shape[-2]}.")
    return [_solve(diagonals, rhs, pivoting, perturb)]
