"""``tf.range`` through ``jta.import_function``, against TensorFlow: static arguments (integer and float),
and integer bounds known at run time only, whose length ``jta.checked`` learns (a bare ``jax.jit`` refuses,
code 405). Every combination of start, limit and delta of a small grid gives TensorFlow's values, or its
error (class and text), eagerly and under ``jta.checked``."""

from __future__ import annotations

import itertools
from typing import Any

import numpy as np
import pytest

tf = pytest.importorskip("tensorflow")

import jax  # noqa: E402

import jta  # noqa: E402
from jta.graph_import._messages import GraphError  # noqa: E402

GRID = list(itertools.product((0, 3, 5), (0, 4), (2, -1, -3, 0)))


def _tf_error(f: Any, *args: Any) -> str:
    with pytest.raises(tf.errors.InvalidArgumentError) as caught:
        f(*args)
    text = str(caught.value.message).split("\n\n")[-1].split("\n\t [[")[0].strip()
    return text.split("}} ")[-1]  # past "{{function_node ...}} " of an eager call


@pytest.mark.parametrize("dtype", [np.int32, np.float32])
def test_arguments_of_an_eager_call(dtype: Any) -> None:
    """Arguments of an eager call are concrete: every range runs, or fails as TensorFlow's kernel does
    (its graph refuses constants that fail, so they are arguments here)."""
    spec = [tf.TensorSpec([], tf.as_dtype(dtype))] * 3
    f = tf.function(lambda a, b, d: tf.range(a, b, d), input_signature=spec)
    jax_fn, params = jta.import_function(f, dtype(0), dtype(4), dtype(1))
    for start, limit, delta in GRID:
        args = (dtype(start), dtype(limit), dtype(delta))
        try:
            want = f(*args).numpy()
        except tf.errors.InvalidArgumentError:
            with pytest.raises(jta.errors.InvalidArgumentError) as caught:
                jax_fn(params, *args)
            assert str(caught.value).endswith(_tf_error(f, *args)), (start, limit, delta)
            continue
        got = jax_fn(params, *args)
        assert got.dtype == want.dtype
        np.testing.assert_array_equal(got, want, err_msg=str((start, limit, delta)))


@pytest.mark.parametrize("mode", ["eager", "checked"])
def test_bounds_known_at_run_time(mode: str) -> None:
    """``tf.range(a, b, delta)`` of int32 arguments: the reversal idiom ``tf.range(n - 1, -1, -1)`` of a length
    the data decides, and the grid's bounds with each static delta."""
    for delta in (2, -1, -3):
        @tf.function(input_signature=[tf.TensorSpec([], tf.int32), tf.TensorSpec([], tf.int32)])
        def f(a: Any, b: Any, delta: int = delta) -> Any:
            return tf.range(a, b, delta) * 10

        jax_fn, params = jta.import_function(f, np.int32(0), np.int32(4))
        run = jax_fn if mode == "eager" else jta.checked(jax.jit(jax_fn))
        for start, limit, _ in GRID[::4]:
            a, b = np.int32(start), np.int32(limit)
            try:
                want = f(a, b).numpy()
            except tf.errors.InvalidArgumentError:
                with pytest.raises(jta.errors.InvalidArgumentError) as caught:
                    run(params, a, b)
                assert str(caught.value).endswith(_tf_error(f, a, b)), (start, limit, delta)
                continue
            np.testing.assert_array_equal(run(params, a, b), want, err_msg=str((start, limit, delta)))
    with pytest.raises(jta.errors.UnimplementedError) as caught:
        jax.jit(jax_fn)(params, np.int32(0), np.int32(4))
    assert GraphError.NOT_STATIC.matches(caught.value) and "jta.checked learns it" in str(caught.value)
