import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jta
from jta import raw_ops as ops


def test_write_stack_in_scan_matches_sin():
    def step(ta, t):
        return ta.write(t, jnp.sin(t * 1.0)), None

    ta, _ = jax.lax.scan(step, jta.TensorArray(jnp.float32, size=4, element_shape=()), jnp.arange(4))
    np.testing.assert_allclose(ta.stack(), np.sin(np.arange(4.0)), rtol=1e-6)


def test_traced_out_of_range_write_is_reported_by_throw():
    ta = jax.jit(lambda i: jta.TensorArray(jnp.float32, size=2, element_shape=()).write(i, 1.0))(5)
    with pytest.raises(jta.errors.InvalidArgumentError) as info:
        jta.throw(ta)
    assert str(info.value) == ("TensorArray TensorArray: Tried to write to index 5 but array is not resizeable "
                               "and size is: 2")  # the text exactly (the note naming the array comes after it)


def test_raw_read_twice_is_cleared():
    s = ops.new_state()
    s, h, f = ops.TensorArrayV3(s, 3, jnp.float32, tensor_array_name="foo")
    s, f = ops.TensorArrayWriteV3(s, h, 0, jnp.array([[4.0, 5.0]]), f)
    s, v = ops.TensorArrayReadV3(s, h, 0, f, jnp.float32)
    np.testing.assert_array_equal(v, [[4.0, 5.0]])
    with pytest.raises(jta.errors.InvalidArgumentError, match="Could not read index 0 twice"):
        ops.TensorArrayReadV3(s, h, 0, f, jnp.float32)
