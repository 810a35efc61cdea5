"""A size the data decides inside a loop body, under ``jta.checked`` (red-team batch 17): a
``boolean_mask`` of each step's row, then an op that takes no empty input (a softmax, ``s[0]``).
``jta.checked`` traces with a guess where it has not learned the size yet; inside a loop body no probe
reaches it, and a guess of 0 rows failed the trace with an error TensorFlow never raises. It now traces
again guessing 1 row, and the run reports the size: learned where every step has the same (TensorFlow's
value), refused as documented where the steps differ (the eager call runs it).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

tf = pytest.importorskip("tensorflow")

import jax  # noqa: E402

import jta  # noqa: E402
from jta._records.catalogue import Error  # noqa: E402

USES: dict[str, Callable[[Any], Any]] = {
    "softmax": lambda s: tf.reduce_sum(tf.nn.softmax(s) * s),
    "first": lambda s: s[0],
}


def _masked(use: Callable[[Any], Any]) -> Any:
    @tf.function
    def f(x: Any, threshold: Any) -> Any:
        def body(t: Any, acc: Any) -> Any:
            row = x[t % tf.shape(x)[0]]
            return t + 1, acc + use(tf.boolean_mask(row, row > threshold))

        return tf.while_loop(lambda t, acc: acc < 5.0, body, (0, 0.0))[1]

    return f


@pytest.mark.parametrize("name", list(USES))
def test_a_masked_row_in_a_loop_body_is_learned_or_refused_as_documented(name: str) -> None:
    f = _masked(USES[name])
    same = np.array([[2.0, -1.0, 0.5, -3.0], [1.0, 0.25, -2.0, -1.0]], np.float32)  # 2 kept in every row
    args = (same, np.float32(0.0))
    fn, params = jta.import_function(f, *args)
    np.testing.assert_allclose(jta.checked(jax.jit(fn))(params, *args), f(*args).numpy(), rtol=1e-6)
    differ = np.array([[2.0, -1.0, 0.5, 3.0], [1.0, -0.25, -2.0, -1.0]], np.float32)  # 3 kept, then 1
    args = (differ, np.float32(0.0))
    fn, params = jta.import_function(f, *args)
    np.testing.assert_allclose(fn(params, *args), f(*args).numpy(), rtol=1e-6)  # eagerly: step by step
    with pytest.raises(jta.errors.UnimplementedError, match="an eager call runs any loop step by step") as info:
        jta.checked(jax.jit(fn))(params, *args)
    assert Error.RESULT_SIZE_LEARNED.matches(info.value)
