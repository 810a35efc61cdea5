"""Numerical comparison of (nested) results."""

from __future__ import annotations

from typing import Any

import jax
import numpy as np


def assert_close(actual: Any, expected: Any, rtol: float = 1e-5, atol: float = 1e-6, label: str = "") -> None:
    """Element-wise comparison of (nested tuples of) arrays, shapes included. A tuple in
    ``expected`` is structure (matched by a tuple or list); a list is array data. ``label``
    names what is compared (e.g. the route) in failure messages."""
    if isinstance(expected, tuple):
        assert isinstance(actual, (tuple, list)) and len(actual) == len(expected), (label, actual, expected)
        for a, e in zip(actual, expected, strict=True):
            assert_close(a, e, rtol, atol, label)
        return
    actual, expected = np.asarray(actual), np.asarray(expected)
    assert actual.shape == expected.shape, (label, actual.shape, expected.shape)
    np.testing.assert_allclose(actual, expected, rtol=rtol, atol=atol, err_msg=label)


def max_abs_diff(a: Any, b: Any) -> float:
    """The largest absolute difference between the leaves of two pytrees of the same structure."""
    leaves = zip(jax.tree_util.tree_leaves(a), jax.tree_util.tree_leaves(b), strict=True)
    return max(float(np.max(np.abs(np.asarray(x) - np.asarray(y)), initial=0.0)) for x, y in leaves)


# TensorFlow outputs whose contents its kernels choose (``(op type, output index)``): a test compares
# them with nothing. The fused batch norms' reserve spaces are scratch for their gradient op: the
# batch statistics on Eigen's kernels, an inverted variance on cuDNN's, oneDNN's workspace (shape
# ``()`` or ``(0,)`` by CPU) as ``reserve_space_3``; their gradient ops' ``reserve_space_*``
# outputs are placeholders TF documents as unused. tests/test_graph_ops_nn.py checks this list
# against TF's op registry: every output TF names ``reserve_space*`` is here.
IMPLEMENTATION_DEFINED = ({(op, k) for op in ("FusedBatchNorm", "FusedBatchNormV2") for k in (3, 4)}
                          | {("FusedBatchNormV3", k) for k in (3, 4, 5)}
                          | {(op, k) for op in ("FusedBatchNormGrad", "FusedBatchNormGradV2", "FusedBatchNormGradV3")
                             for k in (3, 4)})


def implementation_defined(op_type: str, index: int) -> bool:
    """Whether output ``index`` of a TF op of type ``op_type`` is left to the kernel that runs it."""
    return (op_type, index) in IMPLEMENTATION_DEFINED


def assert_session_outputs(got: list[Any], expected: list[np.ndarray], tolerance: float = 1e-5) -> None:
    """An imported graph's outputs against ``Session.run``'s: the same shapes and dtypes (as JAX
    has them: 64-bit types only under x64), integers and booleans exactly, floats within ``tolerance``."""
    assert len(got) == len(expected)
    for k, (g, e) in enumerate(zip(got, expected, strict=True)):
        g = np.asarray(g)
        assert g.shape == e.shape, (k, g.shape, e.shape)
        assert g.dtype == jax.dtypes.canonicalize_dtype(e.dtype), (k, g.dtype, e.dtype)
        if np.issubdtype(e.dtype, np.inexact):
            np.testing.assert_allclose(g, e, rtol=tolerance, atol=tolerance, err_msg=f"output {k}")
        else:
            np.testing.assert_array_equal(g, e, err_msg=f"output {k}")


def outcome(fn: Any, *args: Any) -> tuple[Any, ...]:
    """``("ok", fn(*args))`` as an array, or ``("error", class name, message)``: a call of TensorFlow or
    of jta, to compare with :func:`assert_same_outcome`."""
    try:
        return "ok", np.asarray(fn(*args))
    except Exception as e:  # noqa: BLE001 - compared with the other side's
        return "error", type(e).__name__, str(e)


def assert_same_outcome(got: tuple[Any, ...], want: tuple[Any, ...], rtol: float = 1e-6) -> None:
    """jta's :func:`outcome` is TensorFlow's: the same value (and shape), or the same exception class
    with TensorFlow's text after jta's ``Node name (Op): `` (TensorFlow adds its function's and node's)."""
    assert got[0] == want[0], (got, want)
    if want[0] == "ok":
        assert got[1].shape == want[1].shape, (got, want)
        np.testing.assert_allclose(got[1], want[1], rtol=rtol)
    else:
        assert got[1] == want[1], (got, want)
        assert got[2].split("): ", 1)[1] in want[2], (got, want)


def assert_grad_is_the_tapes(build: Any, jax_fn: Any, params: Any, x: np.ndarray, rtol: float = 1e-5,
                             atol: float = 1e-6) -> None:
    """``jax.grad`` (under ``jit``) of ``sum(weights * jax_fn(params, x))`` in ``x`` is TensorFlow's tape
    gradient of ``sum(weights * build(x))``, for fixed weights of no symmetry (``cos`` of the positions)."""
    import jax.numpy as jnp
    import tensorflow as tf

    out = np.asarray(jax_fn(params, x))
    weights = np.cos(np.arange(out.size, dtype=np.float32)).reshape(out.shape)
    v = tf.constant(x)
    with tf.GradientTape() as tape:
        tape.watch(v)
        loss = tf.reduce_sum(weights * build(v))
    got = jax.jit(jax.grad(lambda u: jnp.sum(weights * jax_fn(params, u))))(x)
    np.testing.assert_allclose(got, tape.gradient(loss, v).numpy(), rtol=rtol, atol=atol)
