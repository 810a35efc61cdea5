"""TensorFlow's TensorArray gradient machinery, functional.

TensorFlow differentiates TensorArray programs with *gradient accumulators*: for a forward
array and a gradient ``source`` (one per ``tf.gradients`` call), ``TensorArrayGradV3``
looks up or creates an aggregating array of the same size. The backward rules of
``tensor_array_grad.py`` then write partial gradients into it (Read → write, Gather →
scatter, Concat → split) and read totals back out (Write → read, Scatter → gather,
Split → concat).

jta keeps the registry explicit: a plain dict ``{(forward name, source): accumulator}`` that
you thread through your code (and through ``lax.scan``/``jit``: it is a pytree). Asking twice
for the same source returns the same accumulator; different sources are independent, so two
gradient computations never double count. The key is the forward array's *name* (TensorFlow's
``<name>@<source>``): forward arrays that share one registry need distinct
``tensor_array_name``s (``jta.raw_ops`` names are unique per state already); asking for the
accumulator of a second array under a taken name raises a ``ValueError``.

```python
>>> import jax.numpy as jnp, jta
>>> from jta import gradients
>>> ta = jta.TensorArray(jnp.float32, size=2, element_shape=(2,)).unstack(jnp.ones((2, 2)))
>>> grads = {}                                              # the registry
>>> grads = gradients.read_grad(grads, ta, 0, jnp.array([1.0, 2.0]), source="gradients")
>>> grads = gradients.read_grad(grads, ta, 0, jnp.array([3.0, 4.0]), source="gradients")  # sums
>>> grads, dvalue = gradients.unstack_grad(grads, ta, source="gradients")
>>> dvalue
Array([[4., 6.],
       [0., 0.]], dtype=float32)

```

JAX's own autodiff (``jax.grad``/``vjp``/``jvp``) through TensorArray programs needs none of
this; the rules here reproduce TensorFlow's graph-mode backward pass step by step, e.g. to port
a hand-written TF backward pass, or to compute many gradients into one
``TensorArrayGradWithShape`` accumulator.
"""

from __future__ import annotations

from typing import Any, Optional

import jax
import jax.numpy as jnp
import numpy as np

from ._core import accumulators, kernels
from ._core.array import require_static_size
from ._delivery import value_ops
from ._records.catalogue import Error
from .tensor_array import TensorArray

__all__ = [
    "Registry", "grad_source", "accumulator", "put",
    "read_grad", "write_grad", "gather_grad", "scatter_grad", "concat_grad", "split_grad",
    "stack_grad", "unstack_grad",
]

Registry = dict[tuple[str, str], TensorArray]
"""A gradient registry: ``{(forward name, source): accumulator}`` (a pytree)."""


def grad_source(name: str) -> str:
    """TensorFlow's ``_GetGradSource``: the gradient source of an op or tensor name.

    The prefix of ``name`` up to and including its last ``/``-separated component that starts
    with ``gradients`` (``"foo/gradients_1/bar"`` → ``"foo/gradients_1"``).

    ```python
    >>> from jta.gradients import grad_source
    >>> grad_source("foo/gradients_1/bar")
    'foo/gradients_1'

    ```
    """
    parts = name.split("/")
    found = [i for i, p in enumerate(parts) if p.startswith("gradients")]
    if not found:
        Error.NO_GRADIENT_SOURCE.raise_(name=name)
    return "/".join(parts[: found[-1] + 1])


def accumulator(registry: Registry, ta: TensorArray, source: str, shape_to_prepend: Any = ()
                ) -> tuple[Registry, TensorArray]:
    """Look up or create the accumulator of ``ta`` for ``source`` (``TensorArrayGradV3``).

    **Arguments:**

    - `registry`: the gradient registry (a dict, possibly empty).
    - `ta`: the forward array.
    - `source`: the gradient source, e.g. ``"gradients"``.
    - `shape_to_prepend`: ``TensorArrayGradWithShape``'s extra leading element dims. Ignored
      when the accumulator already exists, as in TensorFlow.

    **Returns:** ``(registry, accumulator)``; the registry holds the accumulator.
    """
    _, g, registry = accumulators.get_or_create(registry, ta, source, shape_to_prepend)
    return registry, g


def put(registry: Registry, g: TensorArray) -> Registry:
    """Store an updated accumulator ``g`` back under its ``(forward name, source)`` key."""
    key = accumulators.find_key(registry, g.name) if g.is_accumulator else None
    if key is None:
        Error.NOT_AN_ACCUMULATOR.raise_(handle=g.name)
    return {**registry, key: g}


def _update(registry: Registry, ta: TensorArray, source: str, fn: Any,
            shape_to_prepend: Any = ()) -> tuple[Registry, Any]:
    registry, g = accumulator(registry, ta, source, shape_to_prepend)
    g, out = fn(g)
    return {**registry, (ta.name, str(source)): g}, out


def read_grad(registry: Registry, ta: TensorArray, index: Any, dvalue: Any, source: str,
              shape_to_prepend: Any = ()) -> Registry:
    """Gradient of ``ta.read(index)``: add ``dvalue`` into the accumulator at ``index``."""
    return _update(registry, ta, source, lambda g: (kernels.write(g, index, _as(g, dvalue)), None),
                   shape_to_prepend)[0]


def write_grad(registry: Registry, ta: TensorArray, index: Any, source: str,
               shape_to_prepend: Any = ()) -> tuple[Registry, jax.Array]:
    """Gradient of ``ta.write(index, value)``: read (and clear) the total at ``index``."""
    def rule(g: TensorArray) -> tuple[TensorArray, jax.Array]:
        return value_ops.read(g, index, mark=True)
    return _update(registry, ta, source, rule, shape_to_prepend)


def gather_grad(registry: Registry, ta: TensorArray, indices: Any, dvalue: Any, source: str,
                shape_to_prepend: Any = ()) -> Registry:
    """Gradient of ``ta.gather(indices)``: scatter-add ``dvalue`` into the accumulator."""
    return _update(registry, ta, source, lambda g: (kernels.unpack_or_scatter(g, indices, _as(g, dvalue)), None),
                   shape_to_prepend)[0]


def scatter_grad(registry: Registry, ta: TensorArray, indices: Any, source: str,
                 shape_to_prepend: Any = ()) -> tuple[Registry, jax.Array]:
    """Gradient of ``ta.scatter(indices, value)``: gather the totals at ``indices``."""
    def rule(g: TensorArray) -> tuple[TensorArray, jax.Array]:
        return value_ops.gather(g, indices, mark=True)
    return _update(registry, ta, source, rule, shape_to_prepend)


def concat_grad(registry: Registry, ta: TensorArray, lengths: Any, dvalue: Any, source: str,
                shape_to_prepend: Any = ()) -> Registry:
    """Gradient of ``ta.concat()``: split ``dvalue`` with the forward ``lengths`` into the accumulator."""
    return _update(registry, ta, source, lambda g: (kernels.split(g, _as(g, dvalue), lengths), None),
                   shape_to_prepend)[0]


def split_grad(registry: Registry, ta: TensorArray, source: str, shape_to_prepend: Any = ()
               ) -> tuple[Registry, jax.Array]:
    """Gradient of ``ta.split(value, lengths)``: concatenate the accumulated totals."""
    def rule(g: TensorArray) -> tuple[TensorArray, jax.Array]:
        g, value, _ = value_ops.concat(g, mark=True)
        return g, value
    return _update(registry, ta, source, rule, shape_to_prepend)


def stack_grad(registry: Registry, ta: TensorArray, dvalue: Any, source: str,
               shape_to_prepend: Any = ()) -> Registry:
    """Gradient of ``ta.stack()`` (a gather of ``range(size)``)."""
    n = np.shape(dvalue)[0]
    return gather_grad(registry, ta, np.arange(n), dvalue, source, shape_to_prepend)


def unstack_grad(registry: Registry, ta: TensorArray, source: str, size: Optional[int] = None,
                 shape_to_prepend: Any = ()) -> tuple[Registry, jax.Array]:
    """Gradient of ``ta.unstack(value)`` (a scatter to ``range(size)``)."""
    n = size if size is not None else require_static_size(ta, "unstack_grad")
    return scatter_grad(registry, ta, np.arange(n), source, shape_to_prepend)


def _as(g: TensorArray, value: Any) -> jax.Array:
    return jnp.asarray(value, g.dtype)
