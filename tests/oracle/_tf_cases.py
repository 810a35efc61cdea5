"""Runners for ``test_spec_cases_tf.py``: one case body, run on live TensorFlow and on jta.

A *method body* ``body(make, *args)`` builds arrays with ``make(dtype, size, **kwargs)`` (the
``tf.TensorArray`` constructor signature) and returns a (nested) tuple of results. It runs on:

* TensorFlow: :func:`run_k` (``tf.TensorArray`` in a ``tf.compat.v1`` graph with control flow
  v1 — mode K, fetched with a ``Session``), :func:`run_e` (eagerly — E), :func:`run_l` (inside
  ``tf.function`` — L), and :func:`run_tf_raw` (:class:`TfRawTA`: the ``tf.raw_ops`` V3 kernels
  called eagerly in program order — mode K);
* jta: :func:`run_jta` with ``make=jta.TensorArray`` or ``make=tests.helpers.RawTA`` (``jta.raw_ops``).

A *handle program* ``program(b, *args)`` uses the handle interface of ``tests.helpers.Raw``
(``b.new``, ``b.write(h, i, v)``, ``b.grad(h, source)``, ...) and runs on :class:`TfRaw` (live
kernels) and on ``tests.helpers.Raw`` / ``tests.helpers.Rules`` (jta); see :func:`run_program`.

Each run gives an :class:`Outcome`: the results (values, dtypes, static shapes) or the error
(class name, normalised message). Results that are arrays (``TensorArray`` objects) are only
forced: their pending errors raise (``jta.throw``; the flow is fetched in K and L).
"""

from __future__ import annotations

import dataclasses
import re
from typing import Any

import jax
import numpy as np
import tensorflow as tf

import jta
from tests.helpers import RawTA, TensorArrayView, k_graph, pytree
from tests.helpers.internals import as_shape, shape_compatible, shape_debug_str, shape_fully_defined

f32 = np.float32


# -- messages --------------------------------------------------------------------------------------

def normalise(msg: str) -> str:
    """The bare TF/jta message: no eager-op wrapper (``{{function_node ...}}``, `` [Op:X] name: ``),
    no graph-execution frame (``Graph execution error: ... Node: ...`` / ``[[{{node X}}]]``), no
    JAX traceback note; runtime array names lose their counter (``foo_17`` → ``foo``; jta's
    ``jta.TensorArray`` names have none, its raw-op names ``foo_<n>`` count per state)."""
    msg = re.sub(r"\n-+\nFor simplicity, JAX has removed .*", "", msg, flags=re.S)
    if "\n\t [[" in msg:  # a graph (Session / tf.function) error: the message is the last line
        msg = msg.split("\n\t [[")[0].rsplit("\n", 1)[-1]
    msg = re.sub(r"^\{\{function_node [^}]*\}\} ", "", msg)
    msg = re.sub(r" \[Op:\w+\]( name: .*)?$", "", msg, flags=re.S)
    return re.sub(r"([A-Za-z]\w*?)_\d+\b", r"\1", msg)


TF_ERRORS = (tf.errors.OpError, ValueError, TypeError, NotImplementedError, IndexError)
JTA_ERRORS = (jta.errors.TensorArrayError, ValueError, TypeError, NotImplementedError, IndexError)


def _error(e: BaseException) -> tuple[str, str]:
    return type(e).__name__, normalise(getattr(e, "message", None) or str(e))


# -- outcomes --------------------------------------------------------------------------------------

FORCED = "<forced>"  # the result slot of an array whose pending effects were forced


@dataclasses.dataclass
class Outcome:
    """Results as ``(value, static shape)`` pairs, or an error ``(class name, message)``."""

    results: list[tuple[Any, Any]] | None = None
    error: tuple[str, str] | None = None

    def values(self) -> list[Any]:
        assert self.error is None, self.error
        return [v for v, _ in self.results]  # type: ignore[union-attr]


def flatten(x: Any) -> list[Any]:
    if isinstance(x, (tuple, list)):
        return [leaf for item in x for leaf in flatten(item)]
    return [x]


def _static(t: Any) -> Any:
    return None if t.shape.rank is None else tuple(t.shape.as_list())


def assert_agree(want: Outcome, got: Outcome, label: str = "") -> None:
    """``got`` (jta) equals ``want`` (TensorFlow): the same error (class and normalised text), or
    the same number of results with equal values, dtypes and shapes; TF's static shape (partial
    in graphs) must be compatible with jta's."""
    if want.error is not None or got.error is not None:
        assert got.error == want.error, f"{label}: TF {want.error} vs jta {got.error}"
        return
    assert want.results is not None and got.results is not None
    assert len(got.results) == len(want.results), (label, got.results, want.results)
    for k, ((wv, ws), (gv, gs)) in enumerate(zip(want.results, got.results, strict=True)):
        where = f"{label} result {k}"
        if isinstance(wv, np.ndarray):
            assert isinstance(gv, np.ndarray), (where, gv)
            assert gv.dtype == wv.dtype, (where, gv.dtype, wv.dtype)
            assert gv.shape == wv.shape, (where, gv.shape, wv.shape)
            assert shape_compatible(ws, gs), (where, "static shapes", ws, gs)
            if wv.dtype.kind in "fc" or wv.dtype == jax.numpy.bfloat16:
                np.testing.assert_allclose(gv.astype(wv.dtype), wv, rtol=1e-6, atol=1e-6, err_msg=where)
            else:
                np.testing.assert_array_equal(gv, wv, err_msg=where)
        else:
            assert gv == wv, (where, gv, wv)


def outcome(fn: Any, errors: tuple[type[BaseException], ...]) -> Outcome:
    try:
        return Outcome(results=fn())
    except errors as e:
        return Outcome(error=_error(e))


# -- TensorFlow runners ----------------------------------------------------------------------------

def tf_make(dtype: Any, size: Any = None, **kw: Any) -> Any:
    return tf.TensorArray(dtype if isinstance(dtype, tf.DType) else tf.as_dtype(np.dtype(dtype)), size, **kw)


class Unknown:
    """An argument whose static shape is unknown in a K graph (``placeholder_with_default``)."""

    def __init__(self, value: Any) -> None:
        self.value = value


class Tensor:
    """An argument that is a tensor on both sides (``tf.constant`` / ``jnp.asarray``), not a NumPy
    value (which TF's Python layer converts to the array's dtype)."""

    def __init__(self, value: Any) -> None:
        self.value = value


def _unwrap(args: tuple, side: str = "tf") -> list[Any]:
    def one(a: Any) -> Any:
        if isinstance(a, Tensor):
            return tf.constant(a.value) if side == "tf" else jax.numpy.asarray(a.value)
        return a.value if isinstance(a, Unknown) else a
    return [one(a) for a in args]


def _is_tf_array(x: Any) -> bool:
    return isinstance(x, tf.TensorArray)


def _py(x: Any) -> Any:
    return x if isinstance(x, (str, bool, int, float, type(None))) else str(x)


def run_k(body: Any, *args: Any) -> Outcome:
    """``body(tf_make, *args)`` in a K graph; results fetched in one ``Session.run``."""
    with k_graph() as graph:
        def build() -> list[Any]:
            targs = [tf.compat.v1.placeholder_with_default(a.value, shape=None) if isinstance(a, Unknown)
                     else _unwrap((a,))[0] for a in args]
            return flatten(body(tf_make, *targs))

        try:
            leaves = build()
        except TF_ERRORS as e:
            return Outcome(error=_error(e))
        fetches = [x.flow if _is_tf_array(x) else x for x in leaves]
        runnable = [f for f in fetches if isinstance(f, (tf.Tensor, tf.Operation))]
        try:
            with tf.compat.v1.Session(graph=graph) as sess:
                values = iter(sess.run(runnable))
        except TF_ERRORS as e:
            return Outcome(error=_error(e))
    results = []
    for x, f in zip(leaves, fetches, strict=True):
        if _is_tf_array(x) or isinstance(f, tf.Operation):
            next(values)
            results.append((FORCED, None))
        elif isinstance(f, tf.Tensor):
            results.append((np.asarray(next(values)), _static(f)))
        else:
            results.append((_py(x), None))
    return Outcome(results=results)


def _leaf(x: Any) -> tuple[Any, Any]:
    """An eager result as ``(value, static shape)``; arrays are forced."""
    if isinstance(x, (jta.TensorArray, RawTA, jta.raw_ops.State)):
        jta.throw(pytree(x))
        return FORCED, None
    if _is_tf_array(x) or isinstance(x, (TfRawTA, tf.Operation)) or x is None:  # E's close() gives None
        return FORCED, None
    if isinstance(x, tf.Tensor):
        return x.numpy(), _static(x)
    if isinstance(x, (jax.Array, np.ndarray, np.generic)):
        return np.asarray(x), tuple(np.shape(x))
    return _py(x), None


def run_e(body: Any, *args: Any) -> Outcome:
    """``body(tf_make, *args)`` eagerly (mode E)."""
    return outcome(lambda: [_leaf(x) for x in flatten(body(tf_make, *_unwrap(args)))], TF_ERRORS)


def run_l(body: Any, *args: Any) -> Outcome:
    """``body(tf_make, *args)`` inside ``tf.function`` (mode L); static shapes seen while tracing."""
    traced: list[Any] = []

    @tf.function(autograph=False)
    def fn():
        traced[:] = flatten(body(tf_make, *_unwrap(args)))
        return [x.flow if _is_tf_array(x) else x for x in traced if _is_tf_array(x) or isinstance(x, tf.Tensor)]

    def go() -> list[tuple[Any, Any]]:
        values = iter(fn())
        out = []
        for x in traced:
            if _is_tf_array(x):
                next(values)
                out.append((FORCED, None))
            elif isinstance(x, tf.Tensor):
                out.append((next(values).numpy(), _static(x)))
            else:  # L's close() is a no-op Operation
                out.append((FORCED, None) if isinstance(x, tf.Operation) else (_py(x), None))
        return out

    return outcome(go, TF_ERRORS)


def run_tf_raw(body: Any, *args: Any) -> Outcome:
    """``body(TfRawTA, *args)``: the live kernels, eagerly, in program order (mode K)."""
    return outcome(lambda: [_leaf(x) for x in flatten(body(TfRawTA, *_unwrap(args)))], TF_ERRORS)


TF_RUNNERS = {"K": run_k, "E": run_e, "L": run_l, "raw": run_tf_raw}


# -- jta runner ------------------------------------------------------------------------------------

def run_jta(body: Any, *args: Any, make: Any = jta.TensorArray) -> Outcome:
    """``body(make, *args)`` eagerly on jta; arrays in the results are forced (``jta.throw``)."""
    return outcome(lambda: [_leaf(x) for x in flatten(body(make, *_unwrap(args, "jta")))], JTA_ERRORS)


# The jta API compared with each TF runner: the functional class with K/E/L, raw ops with raw.
JTA_MAKE = {"K": jta.TensorArray, "E": jta.TensorArray, "L": jta.TensorArray, "raw": RawTA}


def shape_str(shape: Any) -> str:
    """A (partial) element shape, the same text for TF (``TensorShape``) and jta (tuples)."""
    return shape_debug_str(as_shape(shape))


# -- the live kernels behind jta's raw-op interfaces ---------------------------------------------

def _tf_shape(shape: Any) -> tf.TensorShape:
    return tf.TensorShape(None if shape is None else list(shape))


class TfRaw:
    """Mode K on live TensorFlow: the ``tf.raw_ops`` TensorArray kernels called eagerly, behind the
    handle interface of ``tests.helpers.Raw`` (handles are ``<name>_<k>`` and ``<handle>@<source>``).

    Like TF's Python layer (and ``tests.helpers.Raw``), ``stack``/``gather``/``concat`` pass the
    element shape as their attribute: the creation attribute, pinned by the first write when
    ``infer_shape`` (the kernel's ``identical_element_shapes``)."""

    kind = "tf"

    def __init__(self) -> None:
        self.handles: dict[str, Any] = {}
        self.flows: dict[str, Any] = {}
        self.dtypes: dict[str, Any] = {}
        self.shapes: dict[str, Any] = {}  # jta's normal form (internals.as_shape)
        self.infer: dict[str, bool] = {}

    def dtype(self, h: str) -> Any:
        return self.dtypes[h]

    def element_shape(self, h: str) -> Any:
        return self.shapes[h]

    def new(self, size: int, dtype: Any = f32, name: str = "foo", infer_shape: bool = True,
            element_shape: Any = None, dynamic_size: bool = False, clear_after_read: bool = True) -> str:
        dt = tf.as_dtype(np.dtype(dtype))
        es = as_shape(element_shape)
        handle, flow = tf.raw_ops.TensorArrayV3(
            size=size, dtype=dt, element_shape=_tf_shape(es), dynamic_size=dynamic_size,
            clear_after_read=clear_after_read, identical_element_shapes=infer_shape, tensor_array_name=name)
        h = f"{name}_{len(self.handles)}"
        self.handles[h], self.flows[h], self.dtypes[h], self.shapes[h], self.infer[h] = handle, flow, dt, es, infer_shape
        return h

    def _pin(self, h: str, shape: Any) -> None:
        if self.infer[h] and not shape_fully_defined(self.shapes[h]):
            self.shapes[h] = tuple(int(d) for d in shape)

    def write(self, h: str, i: Any, v: Any) -> None:
        self.flows[h] = tf.raw_ops.TensorArrayWriteV3(handle=self.handles[h], index=i, value=v, flow_in=self.flows[h])
        self._pin(h, np.shape(v))

    def read(self, h: str, i: Any) -> Any:
        return tf.raw_ops.TensorArrayReadV3(handle=self.handles[h], index=i, flow_in=self.flows[h],
                                            dtype=self.dtypes[h])

    def read_as(self, h: str, i: Any, dtype: Any) -> Any:
        return tf.raw_ops.TensorArrayReadV3(handle=self.handles[h], index=i, flow_in=self.flows[h],
                                            dtype=tf.as_dtype(np.dtype(dtype)))

    def gather(self, h: str, indices: Any) -> Any:
        return tf.raw_ops.TensorArrayGatherV3(handle=self.handles[h], indices=indices, flow_in=self.flows[h],
                                              dtype=self.dtypes[h], element_shape=_tf_shape(self.shapes[h]))

    def stack(self, h: str) -> Any:
        return self.gather(h, tf.range(self.size(h)))

    def scatter(self, h: str, indices: Any, v: Any) -> None:
        self.flows[h] = tf.raw_ops.TensorArrayScatterV3(handle=self.handles[h], indices=indices, value=v,
                                                        flow_in=self.flows[h])
        self._pin(h, np.shape(v)[1:])

    def unstack(self, h: str, v: Any) -> None:
        self.scatter(h, np.arange(np.shape(v)[0], dtype=np.int32), v)

    def concat(self, h: str) -> tuple[Any, Any]:
        es = self.shapes[h]
        return tf.raw_ops.TensorArrayConcatV3(handle=self.handles[h], flow_in=self.flows[h], dtype=self.dtypes[h],
                                              element_shape_except0=_tf_shape(None if es is None else es[1:]))

    def split(self, h: str, v: Any, lengths: Any) -> None:
        self.flows[h] = tf.raw_ops.TensorArraySplitV3(handle=self.handles[h], value=v,
                                                      lengths=np.asarray(lengths, np.int64), flow_in=self.flows[h])
        lengths = np.asarray(lengths).reshape(-1)
        if lengths.size:
            self._pin(h, (int(lengths[0]), *np.shape(v)[1:]))

    def size(self, h: str) -> Any:
        return tf.raw_ops.TensorArraySizeV3(handle=self.handles[h], flow_in=self.flows[h])

    def close(self, h: str) -> None:
        tf.raw_ops.TensorArrayCloseV3(handle=self.handles[h])

    def grad(self, h: str, source: str = "gradients", shape_to_prepend: Any = None) -> str:
        if shape_to_prepend is None:
            handle, flow = tf.raw_ops.TensorArrayGradV3(handle=self.handles[h], flow_in=self.flows[h], source=source)
        else:
            handle, flow = tf.raw_ops.TensorArrayGradWithShape(
                handle=self.handles[h], flow_in=self.flows[h],
                shape_to_prepend=np.asarray(shape_to_prepend, np.int32), source=source)
        g = f"{h}@{source}"
        if g not in self.handles:  # the kernel returns the existing accumulator unchanged
            es = self.shapes[h]
            prepend = tuple(int(d) for d in np.asarray(shape_to_prepend if shape_to_prepend is not None else [],
                                                       np.int64).reshape(-1))
            self.handles[g], self.flows[g], self.dtypes[g] = handle, flow, self.dtypes[h]
            self.shapes[g], self.infer[g] = (None if es is None else prepend + tuple(es)), self.infer[h]
        return g


class TfRawTA(TensorArrayView):
    """:class:`~tests.helpers.RawTA` (the ``tf.TensorArray`` method names over one handle) on the
    live kernels: the same view, over :class:`TfRaw`."""

    driver_cls = TfRaw
    default_name = "TensorArray"


def run_program(program: Any, backend: Any, *args: Any) -> Outcome:
    """``program(backend(), *args)`` (a handle program) on the live kernels or on jta."""
    def go() -> list[tuple[Any, Any]]:
        b = backend()
        out = [_leaf(x) for x in flatten(program(b, *args))]
        if b.kind != "tf":
            jta.throw(b.carry)
        return out

    return outcome(go, TF_ERRORS if backend is TfRaw else JTA_ERRORS)
