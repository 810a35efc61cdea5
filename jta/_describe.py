"""``jta.describe``: text and HTML views of arrays, raw-op states and gradient registries."""

from __future__ import annotations

import html
from typing import Any

import jax

from . import _display
from .raw_ops import State
from .tensor_array import TensorArray

__all__ = ["Description", "describe"]


# -- describe -------------------------------------------------------------------------------
class Description:
    """A view of TensorArrays: ``str()``/``repr()`` give text, Jupyter renders HTML."""

    def __init__(self, text: str, html_: str):
        self.text = text
        self.html = html_

    def __repr__(self) -> str:
        return self.text

    __str__ = __repr__

    def _repr_html_(self) -> str:
        return self.html


def describe(x: Any) -> Description:
    """Describe a TensorArray, a ``jta.raw_ops`` state, a gradient registry
    ``{(forward name, source): accumulator}``, or any pytree holding TensorArrays.

    Safe inside ``jit`` (traced leaves show as ``traced``). Printing gives text; in Jupyter the
    result renders as HTML with each array's slots as a coloured strip.

    ```python
    >>> import jax.numpy as jnp, jta
    >>> ta = jta.TensorArray(jnp.float32, size=3, element_shape=()).write(0, 1.0)
    >>> print(jta.describe(ta))
    TensorArray<TensorArray>(float32, size=3, element_shape=[]) [W . .]
      W written  r read  c read+cleared  . empty  ! slot error  - spare capacity

    ```
    """
    if isinstance(x, TensorArray):
        return Description(_display.array_repr(x), _display.array_html(x))
    if isinstance(x, State):
        return Description(_display.state_repr(x), _display.state_html(x))
    if _display.is_registry(x):
        return Description(_display.registry_repr(x), _display.registry_html(x))
    leaves, _ = jax.tree_util.tree_flatten_with_path(
        x, is_leaf=lambda v: isinstance(v, (TensorArray, State)) or _display.is_registry(v))
    found = [(jax.tree_util.keystr(p), v) for p, v in leaves
             if isinstance(v, (TensorArray, State)) or _display.is_registry(v)]
    texts = [f"{p or '<root>'}:\n" + "\n".join("  " + ln for ln in describe(v).text.splitlines())
             for p, v in found]
    htmls = [f"<div><code>{html.escape(p or '<root>')}</code></div>{describe(v).html}" for p, v in found]
    header = f"{_display.plural(len(found), 'jta object')} in a {type(x).__name__}"
    return Description("\n".join([header, *texts]), _display.wrap(f"<div>{html.escape(header)}</div>" + "".join(htmls)))
