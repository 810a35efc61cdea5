"""``jta.throw``, ``jta.checkify`` and ``jta.checked``: turn recorded errors into exceptions."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, Optional, TypeVar, cast

import jax

from . import _check_op
from ._array import ArrayData
from ._channel import throw_array
from ._check_op import take_raised
from ._checks import is_concrete
from ._functionalize import Split, functionalize, mark_static, split

T = TypeVar("T")
F = TypeVar("F", bound=Callable[..., Any])
_NOTHING: Any = object()


def throw(tree: T = _NOTHING) -> T:
    """Raise the first error recorded in any TensorArray inside ``tree``; else return ``tree``.

    ``tree`` may be a TensorArray, a ``jta.raw_ops`` state, a :class:`jta.ErrorRecord`, or any
    pytree holding them.
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
    leaves = jax.tree_util.tree_leaves(tree, is_leaf=lambda x: isinstance(x, (ArrayData, ErrorRecord)))
    for leaf in leaves:
        if isinstance(leaf, ErrorRecord):
            leaf.throw()
        elif isinstance(leaf, ArrayData):
            throw_array(leaf)
    return tree


@jax.tree_util.register_pytree_node_class
class ErrorRecord:
    """The first TensorArray error of a program, as data: what :func:`checkify` returns.

    A pytree of one integer array ``[code, v1, v2, v3, site]`` (all zeros: no error; batched
    under ``vmap``), so it can be returned from ``jit`` and from a ``jax.export``-ed function.
    ``throw()`` raises it (TensorFlow's class and text), ``exception`` describes it.
    """

    def __init__(self, record: Any):
        self.record = record

    def tree_flatten(self) -> tuple[tuple[Any], None]:
        return (self.record,), None

    @classmethod
    def tree_unflatten(cls, aux: None, children: Any) -> ErrorRecord:
        return cls(*children)

    @property
    def exception(self) -> Optional[Exception]:
        """The recorded error as an exception object (concrete records only), else ``None``."""
        return _check_op.exception(self.record) if is_concrete(self.record) else None

    def throw(self) -> None:
        """Raise the recorded error: now when concrete, else as a value op's check does."""
        if is_concrete(self.record):
            exc = _check_op.exception(self.record)
            if exc is not None:
                raise exc
        else:
            _check_op.bind(self.record[..., :4], self.record[..., 4], deferred=False)

    def __repr__(self) -> str:
        if not is_concrete(self.record):
            return f"ErrorRecord(traced {getattr(self.record, 'shape', '')})"
        exc = self.exception
        return "ErrorRecord(no error)" if exc is None else f"ErrorRecord({type(exc).__name__}: {exc})"


# ``jax.export`` serializes the output tree of a checkified function, ErrorRecord included.
jax.export.register_pytree_node_serialization(ErrorRecord, serialized_name="jta.ErrorRecord",
                                              serialize_auxdata=lambda aux: b"",
                                              deserialize_auxdata=lambda data: None)


def checkify(f: Callable[..., Any], *, static_argnums: Any = None, static_argnames: Any = None
             ) -> Callable[..., tuple[ErrorRecord, Any]]:
    """``f`` returning ``(errors, out)``, with every TensorArray check in it done as data.

    Every check of every op ``f`` runs (arrays returned or not, raw-op states dropped, reads
    inside loops, under ``vmap`` and ``grad``) is folded into one :class:`ErrorRecord` that
    holds the first error in program order: no branch and no host callback, so the result can
    be jitted, exported with ``jax.export``, and raised later with ``jta.throw(errors)``.
    ``f`` is traced even under ``jax.disable_jit()`` (as JAX's own ``checkify`` is), so there too
    its errors come back as data. Custom derivatives (``jax.custom_vjp``) whose functions hold
    TensorArray ops are inlined: differentiate ``f`` before checkifying it.

    ```python
    >>> import jax, jax.numpy as jnp, jta
    >>> def last(xs, i):
    ...     return jta.TensorArray(jnp.float32, size=3, element_shape=()).unstack(xs).read(i)
    >>> errors, value = jax.jit(jta.checkify(last))(jnp.arange(3.0), 7)
    >>> errors
    ErrorRecord(InvalidArgumentError: Tried to read from index 7 but array size is: 3)

    ```
    """
    run = functionalize(f, static_argnums, static_argnames)

    @functools.wraps(f)
    def wrapper(*args: Any, **kwargs: Any) -> tuple[ErrorRecord, Any]:
        record, out = run(*args, **kwargs)
        return ErrorRecord(record), out

    return wrapper


def checked(f: F, *, static_argnums: Any = None, static_argnames: Any = None) -> F:
    """``f``, compiled with every TensorArray check as data; raises the first error it recorded.

    ``jta.checked(f)(*args)`` runs ``jax.jit(jta.checkify(f))``, compiled once per argument
    structure, and raises the first error in program order as jta's exception with
    TensorFlow's text, before handing back ``f``'s value; it also raises errors recorded in the
    arrays and raw-op states ``f`` returns. ``f`` may be jitted already.

    **Arguments:**

    - ``f``: the function; array and Python-number arguments are traced, other leaves
      (strings, callables) are static.
    - ``static_argnums``, ``static_argnames``: arguments passed to ``f`` as they are, as in
      ``jax.jit``; by default those of ``f``'s own ``jax.jit``, if it is one.

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
    compiled: dict[Split, tuple[Callable[..., Any], list[Split]]] = {}

    @functools.wraps(f)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        dynamic, inputs = split(mark_static(f, args, kwargs, static_argnums, static_argnames))
        if inputs not in compiled:
            outputs: list[Split] = []  # the output's other leaves, one per trace (the last is used)
            compiled[inputs] = (jax.jit(functools.partial(_call_checkified, f, inputs, outputs)), outputs)
        run, outputs = compiled[inputs]
        take_raised()  # forget an error that an earlier, unchecked call left behind
        try:
            errors, arrays = run(*dynamic)
            out = outputs[-1].rebuild(arrays)
        except jax.errors.JaxRuntimeError:
            exc = take_raised()  # a check JAX could not functionalize raised from the host
            if exc is None:
                raise
            raise exc from None
        errors.throw()
        return throw(out)

    return cast(F, wrapper)


def _call_checkified(f: Callable[..., Any], inputs: Split, outputs: list[Split], *dynamic: Any
                     ) -> tuple[ErrorRecord, list[Any]]:
    args, kwargs = inputs.rebuild(dynamic)
    errors, out = checkify(f)(*args, **kwargs)
    arrays, rest = split(out)
    outputs.append(rest)
    return errors, arrays
