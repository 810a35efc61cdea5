"""Helpers shared by the gradient tests (``test_gradients_*.py``).

Two *backends* run one program text through the two TF-style routes of jta:

* :class:`Raw` — mode K over ``jta.raw_ops``: one explicit state threaded in program order;
  accumulators come from ``TensorArrayGradV3``/``TensorArrayGradWithShape`` and are read and
  written with the raw ops, exactly as ``tensor_array_grad.py`` builds TF's backward graph.
* :class:`Rules` — the high-level API: functional ``jta.TensorArray`` values, ``ta.grad`` and
  the backward rules of ``jta.gradients`` on an explicit registry dict.

Handles are strings (a raw handle, or a ``jta.TensorArray`` name); a gradient handle is
``"<forward>@<source>"``. Reading/writing a gradient handle through :class:`Rules` goes through
the public rules (``gradients.write_grad`` = TensorArrayGradV3 + read, ``gradients.read_grad`` =
TensorArrayGradV3 + aggregating write), so both routes have kernel semantics on accumulators
(aggregation, clear-after-read, the kernel's error texts).

``b.carry`` is the backend's whole state as a pytree: a program carries it through
``lax.scan``/``fori_loop``/``cond`` by assigning it in and out of loop bodies.
"""

from __future__ import annotations

from typing import Any

import jax.numpy as jnp
import numpy as np

import jta
from jta import gradients as G
from jta import raw_ops as ops

f32 = jnp.float32
SOURCE = "gradients"  # what TF's _GetGradSource gives for the first tf.gradients call


class Raw:
    """Mode K through ``jta.raw_ops`` (TF's ``_GraphTensorArray`` + ``tensor_array_grad.py``)."""

    kind = "raw"
    name_re = r"foo_\d+"  # runtime name of an array created with tensor_array_name="foo"

    def __init__(self) -> None:
        self.state = ops.new_state()
        self.flows: dict[str, Any] = {}

    @property
    def carry(self) -> Any:
        return self.state, self.flows

    @carry.setter
    def carry(self, value: Any) -> None:
        self.state, self.flows = value

    def dtype(self, h: str) -> Any:
        return self.state[h].dtype

    def array(self, h: str) -> jta.TensorArray:
        return self.state[h]

    # -- forward ops (TF's Python layer over the kernels) ---------------------------------
    def new(self, size: int, dtype: Any = f32, name: str = "foo", infer_shape: bool = True,
            **kw: Any) -> str:
        self.state, h, flow = ops.TensorArrayV3(self.state, size, dtype, tensor_array_name=name,
                                                identical_element_shapes=infer_shape, **kw)
        self.flows[h] = flow
        return h

    def write(self, h: str, i: Any, v: Any) -> None:
        self.state, self.flows[h] = ops.TensorArrayWriteV3(self.state, h, i, v, self.flows[h])

    def read(self, h: str, i: Any) -> Any:
        self.state, v = ops.TensorArrayReadV3(self.state, h, i, self.flows[h], self.dtype(h))
        return v

    def peek(self, h: str, i: Any) -> Any:
        """A read whose output TF never computes (only its gradient is asked for): no effect."""
        return self.state[h]._read(i, mark=False)[1]

    def gather(self, h: str, indices: Any) -> Any:
        self.state, v = ops.TensorArrayGatherV3(self.state, h, indices, self.flows[h], self.dtype(h),
                                                element_shape=self.state[h].element_shape)
        return v

    def stack(self, h: str) -> Any:
        return self.gather(h, np.arange(self.state[h]._static_size("stack()")))

    def scatter(self, h: str, indices: Any, v: Any) -> None:
        self.state, self.flows[h] = ops.TensorArrayScatterV3(self.state, h, indices, v, self.flows[h])

    def unstack(self, h: str, v: Any) -> None:
        self.scatter(h, np.arange(np.shape(v)[0]), v)

    def concat(self, h: str) -> tuple[Any, Any]:
        es = self.state[h].element_shape
        self.state, v, lengths = ops.TensorArrayConcatV3(
            self.state, h, self.flows[h], self.dtype(h), element_shape_except0=None if es is None else es[1:])
        return v, lengths

    def split(self, h: str, v: Any, lengths: Any) -> None:
        self.state, self.flows[h] = ops.TensorArraySplitV3(self.state, h, v, lengths, self.flows[h])

    def size(self, h: str) -> Any:
        return ops.TensorArraySizeV3(self.state, h, self.flows[h])[1]

    def close(self, h: str) -> None:
        self.state = ops.TensorArrayCloseV3(self.state, h)

    def grad(self, h: str, source: str = SOURCE, shape_to_prepend: Any = None) -> str:
        if shape_to_prepend is None:
            self.state, gh, flow = ops.TensorArrayGradV3(self.state, h, self.flows[h], source)
        else:
            self.state, gh, flow = ops.TensorArrayGradWithShape(self.state, h, self.flows[h],
                                                               shape_to_prepend, source)
        self.flows.setdefault(gh, flow)
        return gh

    # -- TF's backward rules (tensor_array_grad.py) -----------------------------------------
    def read_grad(self, h: str, i: Any, dv: Any, source: str = SOURCE, shape_to_prepend: Any = None) -> None:
        self.write(self.grad(h, source, shape_to_prepend), i, dv)

    def write_grad(self, h: str, i: Any, source: str = SOURCE, shape_to_prepend: Any = None) -> Any:
        return self.read(self.grad(h, source, shape_to_prepend), i)

    def gather_grad(self, h: str, indices: Any, dv: Any, source: str = SOURCE,
                    shape_to_prepend: Any = None) -> None:
        self.scatter(self.grad(h, source, shape_to_prepend), indices, dv)

    def scatter_grad(self, h: str, indices: Any, source: str = SOURCE, shape_to_prepend: Any = None) -> Any:
        return self.gather(self.grad(h, source, shape_to_prepend), indices)

    def concat_grad(self, h: str, lengths: Any, dv: Any, source: str = SOURCE,
                    shape_to_prepend: Any = None) -> None:
        self.split(self.grad(h, source, shape_to_prepend), dv, lengths)

    def split_grad(self, h: str, source: str = SOURCE, shape_to_prepend: Any = None) -> Any:
        return self.concat(self.grad(h, source, shape_to_prepend))[0]


class Rules:
    """The high-level route: ``jta.TensorArray`` values + ``ta.grad`` + ``jta.gradients``."""

    kind = "ta"
    name_re = "foo"

    def __init__(self) -> None:
        self.arrays: dict[str, jta.TensorArray] = {}
        self.registry: G.Registry = {}

    @property
    def carry(self) -> Any:
        return self.arrays, self.registry

    @carry.setter
    def carry(self, value: Any) -> None:
        self.arrays, self.registry = value

    @staticmethod
    def _split(h: str) -> tuple[str, str]:
        forward, _, source = h.rpartition("@")
        return forward, source

    def array(self, h: str) -> jta.TensorArray:
        if "@" in h:
            return self.registry[self._split(h)]
        return self.arrays[h]

    def dtype(self, h: str) -> Any:
        return self.array(h).dtype

    # -- forward ops ------------------------------------------------------------------------
    def new(self, size: int, dtype: Any = f32, name: str = "foo", **kw: Any) -> str:
        assert name not in self.arrays
        self.arrays[name] = jta.TensorArray(dtype, size, tensor_array_name=name, **kw)
        return name

    def write(self, h: str, i: Any, v: Any) -> None:
        if "@" in h:  # an accumulator: the kernel's aggregating write (= a Read's gradient)
            forward, source = self._split(h)
            self.registry = G.read_grad(self.registry, self.arrays[forward], i, v, source)
        else:
            self.arrays[h] = self.arrays[h].write(i, v)

    def read(self, h: str, i: Any) -> Any:
        if "@" in h:  # an accumulator: read and clear (= a Write's gradient)
            forward, source = self._split(h)
            self.registry, v = G.write_grad(self.registry, self.arrays[forward], i, source)
            return v
        return self.arrays[h].read(i)

    peek = read

    def gather(self, h: str, indices: Any) -> Any:
        assert "@" not in h
        return self.arrays[h].gather(indices)

    def stack(self, h: str) -> Any:
        return self.arrays[h].stack()

    def scatter(self, h: str, indices: Any, v: Any) -> None:
        self.arrays[h] = self.arrays[h].scatter(indices, v)

    def unstack(self, h: str, v: Any) -> None:
        self.arrays[h] = self.arrays[h].unstack(v)

    def concat(self, h: str) -> tuple[Any, Any]:
        ta = self.arrays[h]
        value = ta.concat()
        # The forward `lengths` (TF's second Concat output): dim 0 of every element.
        n = ta._static_size("concat()")
        lengths = np.asarray([np.shape(ta.read(i))[0] for i in range(n)], np.int64)
        return value, lengths

    def split(self, h: str, v: Any, lengths: Any) -> None:
        self.arrays[h] = self.arrays[h].split(v, lengths)

    def size(self, h: str) -> Any:
        return self.array(h).size()

    def close(self, h: str) -> None:
        self.arrays[h] = self.arrays[h].close()

    def grad(self, h: str, source: str = SOURCE, shape_to_prepend: Any = None) -> str:
        ta = self.array(h)
        forward, g, self.registry = ta.grad(source, self.registry,
                                            () if shape_to_prepend is None else shape_to_prepend)
        if "@" not in h:
            self.arrays[h] = forward  # the size is frozen now
        return g.name

    # -- the backward rules of jta.gradients -------------------------------------------------
    def _p(self, shape_to_prepend: Any) -> Any:
        return () if shape_to_prepend is None else shape_to_prepend

    def read_grad(self, h: str, i: Any, dv: Any, source: str = SOURCE, shape_to_prepend: Any = None) -> None:
        self.registry = G.read_grad(self.registry, self.arrays[h], i, dv, source, self._p(shape_to_prepend))

    def write_grad(self, h: str, i: Any, source: str = SOURCE, shape_to_prepend: Any = None) -> Any:
        self.registry, d = G.write_grad(self.registry, self.arrays[h], i, source, self._p(shape_to_prepend))
        return d

    def gather_grad(self, h: str, indices: Any, dv: Any, source: str = SOURCE,
                    shape_to_prepend: Any = None) -> None:
        self.registry = G.gather_grad(self.registry, self.arrays[h], indices, dv, source,
                                      self._p(shape_to_prepend))

    def scatter_grad(self, h: str, indices: Any, source: str = SOURCE, shape_to_prepend: Any = None) -> Any:
        self.registry, d = G.scatter_grad(self.registry, self.arrays[h], indices, source,
                                          self._p(shape_to_prepend))
        return d

    def concat_grad(self, h: str, lengths: Any, dv: Any, source: str = SOURCE,
                    shape_to_prepend: Any = None) -> None:
        self.registry = G.concat_grad(self.registry, self.arrays[h], lengths, dv, source,
                                      self._p(shape_to_prepend))

    def split_grad(self, h: str, source: str = SOURCE, shape_to_prepend: Any = None) -> Any:
        self.registry, d = G.split_grad(self.registry, self.arrays[h], source, self._p(shape_to_prepend))
        return d


BACKENDS = {"raw": Raw, "ta": Rules}


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
    import jax

    leaves = zip(jax.tree_util.tree_leaves(a), jax.tree_util.tree_leaves(b), strict=True)
    return max(float(np.max(np.abs(np.asarray(x) - np.asarray(y)), initial=0.0)) for x, y in leaves)
