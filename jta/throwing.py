"""``jta.throw`` and ``jta.checked``: turn recorded errors into exceptions."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, TypeVar, cast

import jax

from ._array import ArrayData
from ._channel import take_raised, throw_array
from ._checks import is_concrete

T = TypeVar("T")
F = TypeVar("F", bound=Callable[..., Any])
_NOTHING: Any = object()


def throw(tree: T = _NOTHING) -> T:
    """Raise the first error recorded in any TensorArray inside ``tree``; else return ``tree``.

    ``tree`` may be a TensorArray, a ``jta.raw_ops`` state, or any pytree holding them.
    Eagerly (or on the outputs of a jitted function) this raises TensorFlow's exception
    class with TensorFlow's text; inside ``jit`` it raises at run time from compiled code.
    With no argument, it raises the error that a check in compiled code raised since the last
    call (JAX reports those as ``JaxRuntimeError``; this gives jta's class and text back).

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
    if tree is _NOTHING:
        exc = take_raised()
        if exc is not None:
            raise exc
        return cast(T, None)
    arrays = jax.tree_util.tree_leaves(tree, is_leaf=lambda x: isinstance(x, ArrayData))
    for ta in arrays:
        if isinstance(ta, ArrayData):
            throw_array(ta)
    return tree


def checked(f: F) -> F:
    """``f``, raising every error recorded while it ran, as jta's exception with TF's text.

    Errors raised by checks inside compiled code (JAX reports them as ``JaxRuntimeError``) come
    back as jta's class, and errors recorded in the arrays and raw-op states ``f`` returns are
    raised too. Wrap the outermost function: ``jta.checked(jax.jit(step))``.

    ```python
    >>> import jax, jax.numpy as jnp, jta
    >>> @jta.checked
    ... @jax.jit
    ... def last(xs, i):
    ...     return jta.TensorArray(jnp.float32, size=3, element_shape=()).unstack(xs).read(i)
    >>> last(jnp.arange(3.0), 2)
    Array(2., dtype=float32)
    >>> last(jnp.arange(3.0), 7)
    Traceback (most recent call last):
    jta.errors.InvalidArgumentError: Tried to read from index 7 but array size is: 3

    ```
    """

    @functools.wraps(f)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        take_raised()  # forget an error that an earlier, unchecked call left behind
        try:
            out = f(*args, **kwargs)
            if is_concrete(out):
                out = jax.block_until_ready(out)  # errors of asynchronous dispatch surface here
        except jax.errors.JaxRuntimeError:
            exc = take_raised()
            if exc is None:
                raise
            raise exc from None
        return throw(out)

    return cast(F, wrapper)
