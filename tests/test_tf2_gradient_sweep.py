"""The gradients of the non-elementwise ops of the table against TensorFlow's (``tests/helpers/gradsweep.py``):
for each case of the sweep (a small TensorFlow API call: a reduction, a scan, a product, a decomposition, a
convolution, a pool, a gather or scatter, a resize, an FFT, ...) at inputs with ties, zeros, repeated
indices and boundaries, the imported forward's value, ``jax.grad`` of it (of a fixed random contraction
of its outputs) against ``tf.GradientTape``, and the imported train step (the tape inside the
``tf.function``) eagerly and under ``jax.jit`` against TensorFlow's. The elementwise ops' derivatives at
their special points are ``tests/test_tf2_derivatives.py``'s.

What the sweep still finds is listed: :data:`KNOWN` (jta bugs: a wrong gradient or value, a crash),
:data:`TF_QUIRKS` (TensorFlow's gradient is itself wrong or inconsistent there) and :data:`REFUSED` (ops
outside the table: ``UnimplementedError`` code 430), by case, with the reason; a listed case that now
agrees with TensorFlow, or fails otherwise than listed, fails the test (take it off the list, or update it).
``scratch/gradsweep/REPORT.md`` has a repro and the cause in jta's source of each.

By default every 96th case runs (:data:`STRIDE`); ``--long`` runs them all (about 8 minutes), and checks
an eager ``jax.grad`` too. ``python -m tests.helpers.gradsweep NAME`` runs one case and prints its result.
"""

from __future__ import annotations

import pytest

tf = pytest.importorskip("tensorflow")

from tests.helpers import budget  # noqa: E402
from tests.helpers.gradsweep import Case, cases, run_case  # noqa: E402

# Cases where jta differs from TensorFlow: case -> "STATUS: why" (the status ``run_case`` reports, which
# the case must still give).
KNOWN: dict[str, str] = {
    # wrong gradients at degenerate points (NaN/inf conventions)
    "reduce_max.nan": "WRONG_GRAD: a NaN row with zero upstream, under jit: TF 0/0 = nan, jta 0 (eager jax.grad gives "
                      "nan: XLA simplifies JAX's reduce_max JVP; _ops.py::_reduction, jnp.max)",
    "cumulative_logsumexp.neg_inf": "WRONG_GRAD: d/dx at x = -inf: TF nan, jta 0 (_ops_tf2jax.py::_cumulative_logsumexp)",
    "complex_abs.zero_angle": "WRONG_GRAD: d angle / d real at 0: TF -inf, jta nan (_ops_tf2jax.py, the Angle entry)",
}

# Cases where TensorFlow's own gradient is wrong or inconsistent (jta's is the derivative): case -> "STATUS:
# why". Not jta bugs; checked like KNOWN, so a change on either side shows.
TF_QUIRKS: dict[str, str] = {
    "det.complex": "WRONG_GRAD: TF's gradient of a complex determinant lacks a conjugate (central differences agree "
                   "with jta, not TF): a TF bug (_ops_linalg.py::_determinant)",
    "slogdet.complex": "WRONG_GRAD: TF's LogMatrixDeterminant gradient ignores the complex sign output's gradient "
                       "(central differences agree with jta): TF's convention (_ops_linalg.py::_log_determinant)",
    "cumprod.complex": "WRONG_GRAD: TF's Cumprod gradient lacks a conjugate for complex inputs (central differences "
                       "agree with jta, not TF): a TF bug",
    "max_pool3d.ties": "TF_ERROR: TF's eager MaxPool3DGrad gives every tied maximum the gradient, its graph "
                       "gradient the first only: nothing to compare with",
}

# Cases that call an op outside jta's table (``UnimplementedError`` code 430): case -> the op.
REFUSED: dict[str, str] = {
    "sparse.dense_matmul": "SparseTensorDenseMatMul",
    "approx_max_k.plain": "ApproxTopK",
    "isotonic_regression.plain": "IsotonicRegression",
    "bessel_k0.plain": "BesselK0",
    "bessel_j0.plain": "BesselJ0",
    "dawsn.plain": "Dawsn",
}


# Without --long every STRIDE-th case runs: 21 of 328, about 12 s on this 2-core machine. (A case costs
# 0.5-1 s: two tf.functions traced, two imports, two jit compiles and an eager train step that compiles op
# by op; every 8th case took about twice that.) --long: all, with an eager jax.grad too, about 8 minutes.
STRIDE = 96


def _cases() -> list[Case]:
    return cases() if budget.LONG else cases()[::STRIDE]


def test_listed_cases_exist() -> None:
    names = {c.name for c in cases()}
    listed = [*KNOWN, *TF_QUIRKS, *REFUSED]
    assert not set(listed) - names, sorted(set(listed) - names)
    assert len(listed) == len(set(listed)), "a case is on two lists"


@pytest.mark.long
@pytest.mark.parametrize("case", _cases(), ids=lambda c: c.name)
def test_gradient_is_tensorflows(case: Case) -> None:
    result = run_case(case, eager_grad=budget.LONG)
    if case.name in REFUSED:
        assert result.status == "REFUSED", f"listed in REFUSED but {result.status} now (take it off): {result}"
    elif case.name in KNOWN or case.name in TF_QUIRKS:
        where, reason = ("KNOWN", KNOWN[case.name]) if case.name in KNOWN else ("TF_QUIRKS", TF_QUIRKS[case.name])
        assert result.status != "PASS", f"listed in {where} but agrees with TensorFlow now (take it off): {result}"
        listed = reason.split(":")[0]
        assert result.status == listed, f"listed in {where} as {listed}, but now: {result}"
    else:
        assert result.status == "PASS", str(result)
