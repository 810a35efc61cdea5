"""``jta.throw``: turn the error records carried by arrays into exceptions."""

from __future__ import annotations

from typing import TypeVar

import jax

from ._array import ArrayData
from ._channel import throw_array

T = TypeVar("T")


def throw(tree: T) -> T:
    """Raise the first error recorded in any TensorArray inside ``tree``; else return ``tree``.

    ``tree`` may be a TensorArray, a ``jta.raw_ops`` state, or any pytree holding them.
    Eagerly (or on the outputs of a jitted function) this raises TensorFlow's exception
    class with TensorFlow's text; inside ``jit`` it raises at run time from compiled code.

    ```python
    >>> import jax, jax.numpy as jnp, jta
    >>> @jax.jit
    ... def fill(ta, i):
    ...     return ta.write(i, 1.0)
    >>> ta = fill(jta.TensorArray(jnp.float32, size=2, element_shape=()), 5)
    >>> jta.throw(ta)
    Traceback (most recent call last):
    jta.errors.InvalidArgumentError: TensorArray TensorArray: Tried to write to index 5 but array is not resizeable and size is: 2

    ```
    """
    arrays = jax.tree_util.tree_leaves(tree, is_leaf=lambda x: isinstance(x, ArrayData))
    for ta in arrays:
        if isinstance(ta, ArrayData):
            throw_array(ta)
    return tree


