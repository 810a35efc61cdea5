"""A list a loop writes under a branch whose predicate is static in the loop's first abstract step only
(``if t < 1`` of the counter). That step wrote it, and the loop took its growth, one row, for every step:
after a loop of a static trip count its length was the trip count, its stack padded with zero rows,
silently, eagerly and under ``jit``. One more abstract step, with the values the loop changes traced,
now shows the lists a run-time branch grows in one branch and passes on in another: their length is
the run's (eagerly and under ``jta.checked`` TensorFlow's; a bare ``jit`` refuses their stack, 438),
while a list every branch writes keeps its static length.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

tf = pytest.importorskip("tensorflow")

import jax  # noqa: E402

import jta  # noqa: E402
from jta.graph_import._messages import GraphError  # noqa: E402

X = np.linspace(-1.0, 1.0, 3).astype(np.float32) + 1.0


@tf.function
def _static_trip_count(x: Any) -> Any:
    every = tf.TensorArray(tf.float32, size=0, dynamic_size=True)  # written by both branches
    first = tf.TensorArray(tf.float32, size=0, dynamic_size=True)  # written in the first step only
    for t in tf.range(5):
        if tf.reduce_sum(x) * tf.cast(t, tf.float32) > 0.5:
            every = every.write(t, x * 2.0)
        else:
            every = every.write(t, x)
        if t < 1:
            first = first.write(t, x * 3.0)
    return every.stack(), first.stack(), tf.reduce_sum(every.stack() + first.stack(), 0)


@tf.function
def _run_time_trip_count(x: Any, n: Any) -> Any:
    a = tf.TensorArray(tf.float32, size=0, dynamic_size=True)
    b = tf.TensorArray(tf.float32, size=0, dynamic_size=True)

    def body(t: Any, a: Any, b: Any) -> Any:
        b = tf.cond(t < 1, lambda: b.write(t, x * 2.0), lambda: b)
        return t + 1, a.write(t, x * tf.cast(t, tf.float32)), b

    _, a, b = tf.while_loop(lambda t, a, b: t < n, body, (0, a, b), maximum_iterations=8)
    return a.stack(), b.stack(), tf.reduce_sum(a.stack() + b.stack(), 0)  # (b's one row broadcasts)


def _same(got: Any, want: Any) -> None:
    for a, b in zip(got, want, strict=True):
        assert np.shape(a) == tuple(b.shape)
        np.testing.assert_allclose(np.asarray(a), b.numpy(), rtol=1e-6)


@pytest.mark.parametrize("program", ["static", "run_time"])
def test_a_list_written_in_the_first_step_only_has_tensorflows_length(program: str) -> None:
    f, args = (_static_trip_count, (X,)) if program == "static" else (_run_time_trip_count, (X, np.int32(5)))
    want = f(*args)
    fn, params = jta.import_function(f, *args)
    _same(fn(params, *args), want)
    _same(jta.checked(jax.jit(fn))(params, *args), want)
    with pytest.raises(jta.errors.UnimplementedError) as info:
        jax.jit(fn)(params, *args)
    assert GraphError.PADDED_STACK.matches(info.value)
    if program == "static":  # (the list every branch writes has its static length: its stack is not refused)
        assert "TensorArrayV2Stack_1/" in str(info.value)
