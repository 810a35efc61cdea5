"""The drivers that run one program text through jta's TF-style routes.

* :class:`Raw` — **the** raw-op driver: mode K over ``jta.raw_ops``, one explicit state threaded
  through the ops in program order (as the flow chain orders a K graph), behind a *handle
  interface* (``b.new(...) -> h``, ``b.write(h, i, v)``, ``b.grad(h, source)``, ...). Gradient
  accumulators come from ``TensorArrayGradV3``/``TensorArrayGradWithShape`` and are read and
  written with the raw ops, exactly as ``tensor_array_grad.py`` builds TF's backward graph.
* :class:`Rules` — the same handle interface over the high-level API: functional
  ``jta.TensorArray`` values, ``ta.grad`` and the backward rules of ``jta.gradients`` on an
  explicit registry dict.
* :class:`RawTA` — the ``tf.TensorArray`` method names (``ta = ta.write(i, v)``, ``ta.stack()``)
  over one handle of a :class:`Raw` driver, so code written for the functional
  ``jta.TensorArray`` runs unchanged on raw ops. It only binds the handle: every op is the
  driver's. (:class:`TensorArrayView` is the same view over any handle driver; the oracle's
  ``TfRawTA`` is it over the live TF kernels.)

Handles are strings (a raw handle, or a ``jta.TensorArray`` name); a gradient handle is
``"<forward>@<source>"``. Reading/writing a gradient handle through :class:`Rules` goes through
the public rules (``gradients.write_grad`` = TensorArrayGradV3 + read, ``gradients.read_grad`` =
TensorArrayGradV3 + aggregating write), so both routes have kernel semantics on accumulators
(aggregation, clear-after-read, the kernel's error texts).

``b.carry`` is a driver's whole state as a pytree: a program carries it through
``lax.scan``/``fori_loop``/``cond`` by assigning it in and out of loop bodies.
"""

from __future__ import annotations

from typing import Any

import jax.numpy as jnp
import numpy as np

import jta
from jta import gradients
from jta import raw_ops as ops

from . import internals
from .modes import NAMES

f32 = jnp.float32
SOURCE = "gradients"  # what TF's _GetGradSource gives for the first tf.gradients call


class Raw:
    """Mode K through ``jta.raw_ops`` (TF's ``_GraphTensorArray`` + ``tensor_array_grad.py``).

    Like TF's Python layer, ``infer_shape`` becomes the kernel's ``identical_element_shapes``
    and ``stack``/``gather``/``concat`` pass the (kernel's) element shape as their attribute."""

    kind = "raw"
    name_re = NAMES["raw"]  # runtime name of an array created with tensor_array_name="foo"

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

    def element_shape(self, h: str) -> Any:
        return self.state[h].element_shape

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
        return internals.peek(self.state[h], i)

    def gather(self, h: str, indices: Any) -> Any:
        self.state, v = ops.TensorArrayGatherV3(self.state, h, indices, self.flows[h], self.dtype(h),
                                                element_shape=self.element_shape(h))
        return v

    def stack(self, h: str) -> Any:
        # TF's Python layer gathers range(size()); the size is static here (also inside jit).
        return self.gather(h, np.arange(internals.static_size(self.state[h], "stack()")))

    def scatter(self, h: str, indices: Any, v: Any) -> None:
        self.state, self.flows[h] = ops.TensorArrayScatterV3(self.state, h, indices, v, self.flows[h])

    def unstack(self, h: str, v: Any) -> None:
        self.scatter(h, np.arange(np.shape(v)[0]), v)

    def concat(self, h: str) -> tuple[Any, Any]:
        es = self.element_shape(h)
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
    name_re = NAMES["ta"]

    def __init__(self) -> None:
        self.arrays: dict[str, jta.TensorArray] = {}
        self.registry: gradients.Registry = {}

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

    def element_shape(self, h: str) -> Any:
        return self.array(h).element_shape

    # -- forward ops ------------------------------------------------------------------------
    def new(self, size: int, dtype: Any = f32, name: str = "foo", **kw: Any) -> str:
        assert name not in self.arrays
        self.arrays[name] = jta.TensorArray(dtype, size, tensor_array_name=name, **kw)
        return name

    def write(self, h: str, i: Any, v: Any) -> None:
        if "@" in h:  # an accumulator: the kernel's aggregating write (= a Read's gradient)
            forward, source = self._split(h)
            self.registry = gradients.read_grad(self.registry, self.arrays[forward], i, v, source)
        else:
            self.arrays[h] = self.arrays[h].write(i, v)

    def read(self, h: str, i: Any) -> Any:
        if "@" in h:  # an accumulator: read and clear (= a Write's gradient)
            forward, source = self._split(h)
            self.registry, v = gradients.write_grad(self.registry, self.arrays[forward], i, source)
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
        n = internals.static_size(ta, "concat()")
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
        self.registry = gradients.read_grad(self.registry, self.arrays[h], i, dv, source, self._p(shape_to_prepend))

    def write_grad(self, h: str, i: Any, source: str = SOURCE, shape_to_prepend: Any = None) -> Any:
        self.registry, d = gradients.write_grad(self.registry, self.arrays[h], i, source, self._p(shape_to_prepend))
        return d

    def gather_grad(self, h: str, indices: Any, dv: Any, source: str = SOURCE,
                    shape_to_prepend: Any = None) -> None:
        self.registry = gradients.gather_grad(self.registry, self.arrays[h], indices, dv, source,
                                      self._p(shape_to_prepend))

    def scatter_grad(self, h: str, indices: Any, source: str = SOURCE, shape_to_prepend: Any = None) -> Any:
        self.registry, d = gradients.scatter_grad(self.registry, self.arrays[h], indices, source,
                                          self._p(shape_to_prepend))
        return d

    def concat_grad(self, h: str, lengths: Any, dv: Any, source: str = SOURCE,
                    shape_to_prepend: Any = None) -> None:
        self.registry = gradients.concat_grad(self.registry, self.arrays[h], lengths, dv, source,
                                      self._p(shape_to_prepend))

    def split_grad(self, h: str, source: str = SOURCE, shape_to_prepend: Any = None) -> Any:
        self.registry, d = gradients.split_grad(self.registry, self.arrays[h], source, self._p(shape_to_prepend))
        return d


# The two TF-style routes of the gradient tests, by the ids used in parametrizations.
BACKENDS = {"raw": Raw, "ta": Rules}


class TensorArrayView:
    """The ``tf.TensorArray`` constructor and method names over one handle of a handle driver
    (``driver_cls``). Mutators return ``self``, so code written for the functional
    ``jta.TensorArray`` (``ta = ta.write(...)``) runs unchanged; every op is the driver's."""

    driver_cls: Any = Raw
    default_name = ""  # the name used when tensor_array_name is None

    def __init__(self, dtype: Any, size: Any, dynamic_size: bool = False, clear_after_read: bool = True,
                 tensor_array_name: Any = None, infer_shape: bool = True, element_shape: Any = None) -> None:
        self.driver = self.driver_cls()
        self.handle = self.driver.new(size, dtype, tensor_array_name or self.default_name, infer_shape,
                                      element_shape=element_shape, dynamic_size=dynamic_size,
                                      clear_after_read=clear_after_read)

    @property
    def dtype(self) -> Any:
        return self.driver.dtype(self.handle)

    @property
    def element_shape(self) -> Any:
        return self.driver.element_shape(self.handle)

    def write(self, index: Any, value: Any) -> Any:
        self.driver.write(self.handle, index, value)
        return self

    def read(self, index: Any) -> Any:
        return self.driver.read(self.handle, index)

    def gather(self, indices: Any) -> Any:
        return self.driver.gather(self.handle, indices)

    def stack(self) -> Any:
        return self.driver.stack(self.handle)

    def scatter(self, indices: Any, value: Any) -> Any:
        self.driver.scatter(self.handle, indices, value)
        return self

    def unstack(self, value: Any) -> Any:
        self.driver.unstack(self.handle, value)
        return self

    def concat(self) -> Any:
        return self.driver.concat(self.handle)[0]

    def split(self, value: Any, lengths: Any) -> Any:
        self.driver.split(self.handle, value, lengths)
        return self

    def size(self) -> Any:
        return self.driver.size(self.handle)

    def close(self) -> Any:
        self.driver.close(self.handle)
        return self


class RawTA(TensorArrayView):
    """Mode K's ``tf.TensorArray`` over ``jta.raw_ops``: one array of a fresh :class:`Raw` driver.
    ``state`` is the driver's raw-op state (what a traced function returns or a loop carries)."""

    driver_cls = Raw

    @property
    def state(self) -> Any:
        return self.driver.state

    @state.setter
    def state(self, value: Any) -> None:
        self.driver.state = value

    @property
    def flow(self) -> Any:
        return self.driver.flows[self.handle]


# The two APIs of the conformance tests, by the ids used in parametrizations.
APIS = {"raw": RawTA, "ta": jta.TensorArray}


def pytree(x: Any) -> Any:
    """What a case returns from a traced function: ``x`` with every :class:`RawTA` in it (also
    inside tuples, lists and dicts) replaced by its raw-op state; anything else is unchanged
    (``jta.TensorArray`` values and raw-op states are pytrees already)."""
    if isinstance(x, RawTA):
        return x.state
    if isinstance(x, (tuple, list)):
        return type(x)(pytree(y) for y in x)
    if isinstance(x, dict):
        return {k: pytree(v) for k, v in x.items()}
    return x


def with_backend(api: str, program: Any) -> Any:
    """``program(b, *args)`` as a function of ``args`` alone that returns ``(b.carry, outputs)``
    for a fresh ``BACKENDS[api]`` driver ``b`` (the carry first: ``jta.throw`` raises what the
    arrays record)."""
    def fn(*args: Any) -> Any:
        b = BACKENDS[api]()
        out = program(b, *args)
        return b.carry, out
    return fn
