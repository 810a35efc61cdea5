"""Adversarial properties: THE RULE, for any input.

For any input, jta either gives TensorFlow's result, or raises a ``jta.errors`` class, ``ValueError``
or ``TypeError`` whose message names the problem. Never a silent wrong value; never a leaked
internal error (``AttributeError``, ``AssertionError``, ``IndexError``, ``KeyError``,
``ZeroDivisionError``, ``OverflowError``, NumPy's reshape errors, JAX's own ``TypeError``/``ValueError``
from ``dynamic_update_slice``/``broadcast_in_dim``, ``TracerArrayConversionError``,
``ConcretizationTypeError``, a ``JaxRuntimeError`` that is not one of jta's checks); never a hang
(each call has a 60 s alarm) or a multi-GB allocation (see ``test_large_sizes_refused_or_lazy``).

Each property runs the jta call (:func:`attempt`) and classifies the outcome (:func:`judge`): ok,
expected error, or ``VIOLATION (...)`` — a leaked class, an internal text, a message that names
none of the expected words, a refusal of an input TensorFlow answers, a value where TensorFlow
raises, or a value that differs from the one computable here (NumPy; TensorFlow's conversions as
probed on TF 2.21, checked live by ``tests/oracle/test_adversarial_tf.py``). Hypothesis runs
``max_examples`` = 20 per property (500 under ``pytest --long``), ``derandomize=True``, no
shrinking. A known violation that is not fixed yet is marked with :func:`case`'s ``today`` (what
happens instead) as a strict xfail: a fix makes it XPASS, which fails until the marker goes.

Categories (inputs drawn by default), each with the mistakes it guards against:

* ``test_index_kinds`` — 15 kinds of index (Python int incl. ±2**31..2**70, NumPy/JAX scalars and
  0-d arrays of every integer dtype, with and without x64, Python/NumPy bools, NumPy float and
  complex scalars, Python floats/complex, JAX float/bool/complex arrays, strings/bytes, None,
  objects, shape-[1] arrays) × write/read/gather/scatter × eager/disable_jit/jit/scan (index closed
  over), sizes 0 and 3: 15 × 50 = 750. Guards against float, string or bool indices being
  truncated or leaking JAX errors, and against ``scatter([-1])`` into a size-0 array returning
  silently inside jit/scan.
* ``test_traced_index`` — traced indices (jit argument, scan input, vmapped batch) of int8..uint64
  (x64 on/off) and of bool/float/complex dtypes: 2 × 50 = 100.
* ``test_dtypes`` — all 15 dtypes, x64 on/off, values with extremes/NaN/inf through
  unstack/write/scatter and stack/gather/read/concat: 4 × 50 = 200. Guards against int64/uint64/
  float64/complex128 arrays without x64 storing wrapped or infinite values: they must be refused.
* ``test_signed_zeros_and_subnormals`` — -0.0 and subnormals through write/unstack/scatter/split/raw
  scatter: 5 × 50 = 250. TensorFlow stores them as written; adding rows into a zero buffer would
  give +0.0 for -0.0 and 0 for subnormals (XLA flushes denormals), so writes must set rows.
* ``test_python_scalar_traced`` — a Python int/float/complex passed to jit (weakly typed, float64
  under x64) written into each of the 15 dtypes, compared with the eager write: 2 × 50 = 100.
  Guards against refusing, under x64 and jit, a weakly typed float64 written into a float32 array.
* ``test_values_written`` — None, objects, ragged lists, strings, ints beyond int64, NaN/inf/1e40
  written into every dtype, by the methods (write, unstack, scatter) or the raw op: 10 × 50 = 500.
  Guards against None/object()/2**70 being reported as a "dtype string", and against 2**1030
  (beyond float64) leaking ``OverflowError`` instead of a ``ValueError`` that names the value.
* ``test_element_shapes`` — known/partial (None, -1)/unknown/zero-size element shapes,
  infer_shape on/off, a row of a wrong shape, stack/concat/gather/read/size, eager/jit/scan:
  4 × 50 = 200.
* ``test_transforms`` — writes at a random permutation then stack/gather/read, eagerly, jit
  (traced indices), disable_jit, scan, vmap (batched indices and values), grad: 6 × 50 = 300.
* ``test_vmap_out`` — an array returned by vmap used outside it by 15 methods (stack, read, write,
  ..., repr, jit, vmap again): 15 × 50 = 750. Guards against swapped rows or an
  ``AssertionError``: each use gives the right value or one ``ValueError`` naming vmap.
* ``test_size_kinds`` — sizes as ints, NumPy ints, JAX ints, bools, NumPy floats, Python floats,
  strings, None, vectors, negatives (TensorArray and TensorArrayV3): 8 × 50 = 400. TensorFlow
  accepts size=True and size=np.float32(2), so jta must too.
* ``test_dtype_specs`` — dtype as JAX type, NumPy dtype, name, Python type, or not a dtype (None,
  object, str, 'foo', 3, ...), x64 on/off: 6 × 50 = 300. Guards against dtype=None silently
  meaning float32, dtype=object failing only later, and dtype=float meaning float64 under x64
  (TensorFlow makes float32).
* ``test_shape_to_prepend`` — valid, bool, invalid ([-1], [2.5], None, '2', ...), nested ([[2]])
  and traced shape_to_prepend via ta.grad and TensorArrayGradWithShape: 5 × 50 = 250. Guards
  against [-1]/[2.5]/None/traced values leaking internal errors, and against [[2]] being accepted
  as [2] (TensorFlow: "must be a vector").
* ``test_repr_of_tree_mapped`` — repr/_repr_html_ after 12 kinds of ``jax.tree.map`` (x*2, NumPy,
  shapes, dtypes, ShapeDtypeStruct, None, str, objects, ...) of plain/accumulator/closed/vmapped
  arrays, raw states and eval_shape outputs: 12 × 50 = 600. Guards against repr raising on
  tree-mapped arrays (None, str, size-0 buffers, eval_shape + np.asarray).
* ``test_large_sizes_refused_or_lazy`` — 22 fixed cases (sizes 10**9, 2**31-1 ... 2**70,
  capacities, element shapes, growth by write/scatter/read, shape_to_prepend) in one child
  process capped at 3 GiB, abstractly first. Each must be refused before allocating (with
  ResourceExhaustedError, or int32's InvalidArgumentError) or stay lazy; size=2**70 must not leak
  an MLIR TypeError.
* ``test_known_inputs`` — 37 known hard inputs (from the categories above and from
  ``tests/test_inputs.py``), one line each, so that each stays right whatever the properties
  happen to draw.

Default runtime about 60 s on the project's 2-core machine (plus about 12 s for the TF oracle file).
"""

from __future__ import annotations

import contextlib
import json
import math
import signal
import subprocess
import sys
import textwrap
import warnings
from collections.abc import Callable, Iterator
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import HealthCheck, Phase, given, reject, settings
from hypothesis import strategies as st

import jta
from jta import raw_ops as ops
from tests.helpers import budget

# -- the rule ------------------------------------------------------------------------------------

EXAMPLES = 500 if budget.LONG else 8
# No shrinking and one bug per property: a property marked xfail stops at its first violation
# (shrinking the examples of 30 failing properties would cost minutes).
SETTINGS = settings(max_examples=EXAMPLES, deadline=None, derandomize=True, database=None,
                    suppress_health_check=list(HealthCheck), report_multiple_bugs=False,
                    phases=(Phase.explicit, Phase.generate))

ALLOWED = (jta.errors.TensorArrayError, ValueError, TypeError)
# Subclasses of TypeError/ValueError (or other classes) that are JAX's or Python's internals.
LEAKED = (AttributeError, AssertionError, IndexError, KeyError, ZeroDivisionError, OverflowError,
          jax.errors.TracerArrayConversionError, jax.errors.ConcretizationTypeError,
          jax.errors.TracerIntegerConversionError, jax.errors.TracerBoolConversionError,
          jax.errors.UnexpectedTracerError, jax.errors.JaxRuntimeError, MemoryError, RecursionError)
# Texts of errors that JAX, NumPy or Python raise from inside jta: a ValueError/TypeError with one
# of these did not come from a check that names the problem.
INTERNAL_TEXTS = ("dynamic_update_slice", "broadcast_in_dim", "Incompatible shapes for broadcasting",
                  "is not a valid JAX array type", "cannot reshape array", "not a valid value for jnp.array",
                  "Abstract tracer value", "__array__() was called", "int() argument must be",
                  "invalid literal for int()", "incompatible function arguments", "too large to convert",
                  "object arrays are not supported", "unhashable type", "object has no attribute",
                  "not supported between instances", "unsupported operand type", "positional argument",
                  "argument after * must be", "object is not iterable", "could not be broadcast",
                  "Cannot interpret", "not understood", "JAX does not support string indexing",
                  "Shapes must be 1D sequences", "index_in_dim", "dynamic_slice", "Indexer must",
                  "got an unexpected keyword", "object is not subscriptable")


class Hang(BaseException):
    """Raised by :func:`deadline` (a BaseException, so that no ``except Exception`` swallows it)."""


@contextlib.contextmanager
def deadline(seconds: float = 60.0) -> Iterator[None]:
    """Fail a call that hangs: raise :class:`Hang` in the main thread after ``seconds``."""
    def on_alarm(signum: int, frame: Any) -> None:
        raise Hang(f"no answer within {seconds} s")
    old = signal.signal(signal.SIGALRM, on_alarm)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


class Outcome:
    """What one call did: returned ``value``, or raised ``error``."""

    def __init__(self, value: Any = None, error: BaseException | None = None) -> None:
        self.value, self.error = value, error

    @property
    def text(self) -> str:
        return "" if self.error is None else str(self.error).split("\n-----")[0]

    def __repr__(self) -> str:
        if self.error is None:
            return f"returned {_short(self.value)}"
        return f"raised {type(self.error).__module__}.{type(self.error).__name__}: {self.text[:300]}"


def _short(x: Any) -> str:
    text = repr(x).replace("\n", " ")
    return text if len(text) < 300 else text[:297] + "..."


def attempt(thunk: Callable[[], Any], seconds: float = 60.0) -> Outcome:
    """Run ``thunk`` (results forced to host values), classifying nothing yet."""
    try:
        with deadline(seconds), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            value = thunk()
            value = jax.tree.map(lambda x: np.asarray(x) if isinstance(x, jax.Array) else x, value)
        return Outcome(value=value)
    except Hang as e:
        return Outcome(error=e)
    except Exception as e:  # noqa: BLE001 - classified by the caller
        return Outcome(error=e)


NOTHING: Any = object()


def judge(out: Outcome, what: str, *, words: tuple[str, ...] = (), value: Any = NOTHING,
          must_raise: bool = False, may_raise: bool = True, unless: tuple[str, ...] = ()) -> str:
    """Apply THE RULE to one outcome; fail with ``VIOLATION`` when it is broken.

    * an exception must be of ``ALLOWED`` classes, not ``LEAKED`` ones, without an internal text,
      and (``words``) its message must name the problem (any of the words, case-insensitive), and
      must not contain any of ``unless`` (a wrong description, e.g. "string" for ``None``);
    * ``must_raise``: TensorFlow raises here, so a returned value is a silent wrong value;
    * ``value``: the expected result when it returns (``may_raise=False``: it must return).
    Returns ``"ok"`` or ``"error"``."""
    e = out.error
    if e is not None:
        name = f"{type(e).__module__}.{type(e).__name__}"
        if isinstance(e, Hang):
            pytest.fail(f"VIOLATION (hang) {what}: {out}")
        if isinstance(e, LEAKED) or not isinstance(e, ALLOWED):
            pytest.fail(f"VIOLATION (leaked {name}) {what}: {out}")
        internal = [t for t in INTERNAL_TEXTS if t in out.text]
        if internal and not isinstance(e, jta.errors.TensorArrayError):
            pytest.fail(f"VIOLATION (internal {name} {internal[0]!r}) {what}: {out}")
        if not may_raise:
            pytest.fail(f"VIOLATION (refused a valid input) {what}: {out}")
        low = out.text.lower()
        if words and not any(w.lower() in low for w in words):
            pytest.fail(f"VIOLATION (message names none of {words}) {what}: {out}")
        bad = [w for w in unless if w.lower() in low]
        if bad:
            pytest.fail(f"VIOLATION (message wrongly says {bad[0]!r}) {what}: {out}")
        return "error"
    if must_raise:
        pytest.fail(f"VIOLATION (silent value where TensorFlow raises) {what}: {out}")
    if value is not NOTHING:
        same(out.value, value, what)
    return "ok"


def same(got: Any, want: Any, what: str) -> None:
    """Equal values, dtypes and shapes (NaN equals NaN); nested tuples/lists compared leafwise."""
    if isinstance(want, (tuple, list)):
        if not (isinstance(got, (tuple, list)) and len(got) == len(want)):
            pytest.fail(f"VIOLATION (wrong value) {what}: got {_short(got)}, want {_short(want)}")
        for g, w in zip(got, want, strict=True):
            same(g, w, what)
        return
    g, w = np.asarray(got), np.asarray(want)
    if g.shape != w.shape or g.dtype != w.dtype:
        pytest.fail(f"VIOLATION (wrong shape/dtype) {what}: got {g.dtype}{list(g.shape)} {_short(g)}, "
                    f"want {w.dtype}{list(w.shape)} {_short(w)}")
    floating = g.dtype.kind in "fc" or g.dtype == jnp.bfloat16
    if not np.array_equal(g, w, equal_nan=floating) or (floating and not np.array_equal(_signs(g), _signs(w))):
        pytest.fail(f"VIOLATION (wrong value) {what}: got {_short(g)}, want {_short(w)}")


def _signs(x: np.ndarray) -> np.ndarray:
    """Sign bits (so that -0.0 differs from 0.0), real and imaginary parts; NaNs count as positive."""
    parts = [x.real, x.imag] if x.dtype.kind == "c" else [x.astype(np.float32) if x.dtype == jnp.bfloat16 else x]
    return np.stack([np.signbit(p) & ~np.isnan(p) for p in parts])


def xfail(today: str) -> Any:
    """Strict: a fix turns the case into XPASS, which fails until the marker is removed. ``today``
    says what jta does instead of following the rule."""
    return pytest.mark.xfail(strict=True, reason=f"known violation: {today}")


def case(*values: Any, today: str | None = None) -> Any:
    """A parametrization, a strict xfail when ``today`` (what happens instead) is given."""
    marks = () if today is None else (xfail(today),)
    return pytest.param(*values, marks=marks, id="-".join(str(v) for v in values))


# -- contexts ------------------------------------------------------------------------------------

F32 = np.float32


def _scan_once(fn: Callable[[], Any]) -> Any:
    _, out = jax.lax.scan(lambda c, _: (c, fn()), 0, None, length=1)
    return jax.tree.map(lambda x: x[0], out)


_COMPILED: dict[Any, Callable[..., Any]] = {}


def compiled(key: Any, make: Callable[[], Callable[..., Any]]) -> Callable[..., Any]:
    """One ``jta.checked(jax.jit(...))`` per ``key``: examples that differ only in traced data
    reuse JAX's compilation (XLA compiles dominate this file's runtime)."""
    key = (key, jax.config.jax_enable_x64)
    if key not in _COMPILED:
        _COMPILED[key] = jta.checked(jax.jit(make()))
    return _COMPILED[key]


def in_context(context: str, fn: Callable[[], Any], key: Any = None) -> Any:
    """``fn()`` (which closes over its inputs) eagerly, under ``jax.disable_jit``, inside ``jax.jit``
    or as a ``lax.scan`` body; compiled errors come back through ``jta.checked``. ``key`` names
    ``fn`` for :func:`compiled` (``None``: compile afresh)."""
    if context == "eager":
        return jta.throw(fn())
    if context == "disable_jit":
        with jax.disable_jit():
            return jta.throw(jax.jit(fn)())
    body = fn if context == "jit" else (lambda: _scan_once(fn))
    assert context in ("jit", "scan"), context
    if key is None:
        return jta.checked(jax.jit(body))()
    return compiled((context, key), lambda: body)()


STATIC_CONTEXTS = ("eager", "disable_jit", "jit", "scan")
# Drawn contexts: compiled ones a quarter of the time (each costs an XLA compilation).
DRAWN_CONTEXTS = st.sampled_from(("eager",) * 5 + ("disable_jit", "jit", "scan"))


def base(n: int, es: Any = (), dtype: Any = jnp.float32, **kw: Any) -> jta.TensorArray:
    return jta.TensorArray(dtype, size=n, element_shape=es, **kw)


def filled(n: int) -> jta.TensorArray:
    """``[10, 11, ...]`` in ``n`` float32 scalar slots."""
    return base(n).unstack(np.arange(10, 10 + n, dtype=F32))


# -- index kinds ---------------------------------------------------------------------------------

INT_DTYPES = ("int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64")
NONINT_JAX_DTYPES = ("bool", "float16", "bfloat16", "float32", "float64", "complex64", "complex128")

# How TensorFlow treats each kind of index (probed on TF 2.21, tests/oracle/test_adversarial_tf.py):
#   "int"   : the slot (or the range error);
#   "trunc" : NumPy values are cast with astype(int32) (np.float32(1.5) is slot 1, True is 1): jta may
#             give that slot or refuse with a message naming the index;
#   "raise" : TypeError/ValueError (Python floats/complex, tensors of a non-integer dtype, None,
#             strings, objects) or a rank error (shape [1]).
INDEX_KINDS: dict[str, str] = {
    "py_int": "int", "np_int": "int", "np_int_0d": "int", "jax_int": "int",
    "py_bool": "trunc", "np_bool": "trunc", "np_float": "trunc", "np_complex": "trunc",
    "py_float": "raise", "py_complex": "raise", "jax_nonint": "raise",
    "str": "raise", "none": "raise", "object": "raise", "shape_1": "raise",
}
INDEX_WORDS = ("index", "indices")


@st.composite
def index_of_kind(draw: Any, kind: str) -> tuple[Any, Any]:
    """``(index, slot)``: an index of ``kind`` and the slot TensorFlow would use (``None``: none)."""
    small = st.integers(-3, 6)
    if kind == "py_int":
        i = draw(st.one_of(small, st.sampled_from([2**31 - 1, 2**31, -2**31 - 1, 2**40, 2**63 - 1, 2**63, 2**70])))
        return i, i
    if kind in ("np_int", "np_int_0d", "jax_int"):
        dt = np.dtype(draw(st.sampled_from(INT_DTYPES)))
        info = np.iinfo(dt)
        i = draw(st.one_of(st.integers(max(-3, info.min), 6), st.sampled_from([info.min, info.max])))
        if kind == "np_int":
            return dt.type(i), i
        if kind == "np_int_0d":
            return np.array(i, dt), i
        try:
            x = jnp.asarray(np.array(i, dt))  # without x64, 64-bit values narrow here (JAX, not jta)
        except (OverflowError, ValueError):
            reject()
        return x, int(x)
    if kind == "py_bool":
        b = draw(st.booleans())
        return b, int(b)
    if kind == "np_bool":
        b = draw(st.booleans())
        return draw(st.sampled_from([np.bool_(b), np.array(b)])), int(b)
    if kind in ("np_float", "np_complex"):
        x = draw(st.one_of(st.sampled_from([0.0, 1.0, 2.0, 1.5, -0.5, 2.9, -1.0, np.nan, np.inf, 2.0**40]),
                           st.floats(-4, 8)))
        dt = draw(st.sampled_from(["float16", "float32", "float64"] if kind == "np_float"
                                  else ["complex64", "complex128"]))
        v = np.array(x, dt)
        v = v if draw(st.booleans()) else v[()]
        r = float(np.real(v))  # the value after rounding to dt
        slot = int(np.trunc(r)) if np.isfinite(r) and abs(r) < 2**31 else None
        return v, slot
    if kind == "py_float":
        return draw(st.one_of(st.sampled_from([0.0, 1.0, 1.5, -0.5, np.nan]), st.floats(-4, 8))), None
    if kind == "py_complex":
        return complex(draw(st.integers(0, 3)), draw(st.sampled_from([0, 1]))), None
    if kind == "jax_nonint":
        dt = draw(st.sampled_from(NONINT_JAX_DTYPES))
        x = draw(st.sampled_from([0, 1, 2]))
        return jnp.asarray(np.array(x).astype(dt) if dt != "bfloat16" else x, dt), None
    if kind == "str":
        return draw(st.sampled_from(["1", "0", "", "a", b"1", np.str_("1")])), None
    if kind == "none":
        return None, None
    if kind == "object":
        return draw(st.sampled_from([object(), {}, slice(1), [[1]], (1, 2), 1j * np.ones(1)])), None
    assert kind == "shape_1", kind
    i = draw(st.integers(0, 2))
    return draw(st.sampled_from([np.array([i]), jnp.array([i]), [i], np.array([[i]])])), None


def as_indices(index: Any) -> Any:
    """The same index as a vector of one (for gather/scatter); a vector becomes a matrix."""
    if index is None:
        return None
    if isinstance(index, (np.ndarray, jax.Array, np.generic)):
        return np.asarray(index)[None] if isinstance(index, np.generic) else index[None]
    return [index]


INDEX_OPS = ("write", "read", "gather", "scatter")


def index_program(op: str, n: int, index: Any) -> Callable[[], Any]:
    if op == "write":
        return lambda: base(n).write(index, 7.0).stack()
    if op == "read":
        return lambda: filled(n).read(index)
    if op == "gather":
        return lambda: filled(n).gather(as_indices(index))
    return lambda: base(n).scatter(as_indices(index), np.array([7.0], F32)).stack()


def index_expected(op: str, n: int, slot: int) -> Any:
    if op == "write" or op == "scatter":
        want = np.zeros(n, F32)
        want[slot] = 7.0
        return want
    if op == "read":
        return F32(10 + slot)
    return np.array([10 + slot], F32)


def judge_index(out: Outcome, what: str, treatment: str, op: str, n: int, slot: Any) -> str:
    in_range = slot is not None and 0 <= slot < n
    if treatment == "raise" or slot is None:
        return judge(out, what, words=INDEX_WORDS + ("scalar", "vector", "rank"), must_raise=True)
    if in_range:
        # an integer index in range must work; TF's truncations may be refused (message naming the index)
        return judge(out, what, words=INDEX_WORDS, value=index_expected(op, n, slot), may_raise=treatment != "int")
    return judge(out, what, words=INDEX_WORDS + ("size",), must_raise=True)


STATIC_INDEX_KINDS = [
    case("py_int"), case("np_int"), case("np_int_0d"), case("jax_int"),
    case("py_bool"), case("np_bool"), case("np_float"), case("np_complex"),
    case("py_float"), case("py_complex"), case("jax_nonint"),
    case("str"), case("none"), case("object"), case("shape_1"),
]


@pytest.mark.parametrize("kind", STATIC_INDEX_KINDS)
@pytest.mark.long
@SETTINGS
@given(data=st.data())
def test_index_kinds(kind: str, data: Any) -> None:
    """Every kind of index in write/read/gather/scatter, eagerly, under disable_jit, and closed over
    inside jit or a scan body: the slot TensorFlow uses, or an error naming the index."""
    op = data.draw(st.sampled_from(INDEX_OPS), label="op")
    context = data.draw(DRAWN_CONTEXTS, label="context")
    n = data.draw(st.sampled_from([0, 3]), label="size")
    x64 = data.draw(st.booleans(), label="x64") if kind == "jax_int" else False
    with jax.enable_x64(x64):
        index, slot = data.draw(index_of_kind(kind), label="index")
        key = ("index", op, n, type(index).__name__, repr(index))
        out = attempt(lambda: in_context(context, index_program(op, n, index), key))
    judge_index(out, f"{op}({index!r}) on size {n} [{context}, x64={x64}]", INDEX_KINDS[kind], op, n, slot)


TRACED_INDEX = [case("int"), case("nonint")]
# (transform, op): every op under jit, one each in a scan body and under vmap (each pair and dtype
# is one XLA compilation).
TRACED_PAIRS = (("jit", "write"), ("jit", "read"), ("jit", "gather"), ("jit", "scatter"), ("scan", "write"),
                ("vmap", "read"), ("scan", "scatter"), ("vmap", "gather"))


@pytest.mark.parametrize("dtypes", TRACED_INDEX)
@pytest.mark.long
@SETTINGS
@given(data=st.data())
def test_traced_index(dtypes: str, data: Any) -> None:
    """An index that is a traced value (a jit argument, a scan input, a vmapped batch) of every
    dtype, with and without x64: the slot, a recorded range error, or (non-integer dtypes) an error
    naming the index, never a truncated slot."""
    how, op = data.draw(st.sampled_from(TRACED_PAIRS), label="transform, op")
    n = 3
    pool = ("int8", "uint8", "int32", "uint32", "int64", "uint64") if dtypes == "int" else NONINT_JAX_DTYPES
    dt = np.dtype(data.draw(st.sampled_from(pool), label="dtype"))
    x64 = data.draw(st.booleans(), label="x64") if dt.itemsize == 8 else False
    with jax.enable_x64(x64):
        if dtypes == "int":
            info = np.iinfo(dt)
            big = [v for v in (2**31, 2**33 + 1, 2**40) if v <= info.max]
            i = data.draw(st.one_of(st.integers(max(-3, info.min), 5), st.sampled_from(big or [info.max])),
                          label="i")
            try:
                x = jnp.asarray(np.array(i, dt))  # without x64, 64-bit values narrow here (JAX, not jta)
            except (OverflowError, ValueError):
                reject()
            slot, treatment = int(x), "int"
        else:
            x = jnp.asarray(np.array(data.draw(st.sampled_from([0, 1, 2]), label="i")).astype(dt))
            slot, treatment = None, "raise"
        program = lambda i: index_program(op, n, i)()  # noqa: E731
        if how == "jit":
            out = attempt(lambda: compiled(("traced", op), lambda: program)(x))
        elif how == "scan":
            out = attempt(lambda: compiled(("scanned", op), lambda: (
                lambda xs: jax.lax.scan(lambda c, i: (c, program(i)), 0, xs)[1][0]))(x[None]))
        else:
            out = attempt(lambda: compiled(("vmapped", op), lambda: jax.vmap(program))(jnp.stack([x, x])))
            if out.error is None and out.value is not None:
                out.value = out.value[0] if np.array_equal(out.value[0], out.value[1]) else out.value
    judge_index(out, f"{op}(traced {dt.name} {x!r}) on size {n} [{how}, x64={x64}]", treatment, op, n, slot)


# -- dtypes, with and without x64 ---------------------------------------------------------------

ALL_DTYPES = ("bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
              "float16", "bfloat16", "float32", "float64", "complex64", "complex128")
WIDE = ("int64", "uint64", "float64", "complex128")
NARROW = tuple(d for d in ALL_DTYPES if d not in WIDE)


def np_dtype(name: str) -> np.dtype:
    return np.dtype(jnp.bfloat16) if name == "bfloat16" else np.dtype(name)


@st.composite
def values_of(draw: Any, name: str, shape: tuple[int, ...]) -> np.ndarray:
    """A NumPy array of dtype ``name`` (extremes, NaN and infinities included). Subnormals and
    negative zeros are drawn by :func:`test_signed_zeros_and_subnormals` only."""
    from hypothesis.extra import numpy as hnp
    if name == "bfloat16":
        values = draw(hnp.arrays(np.float32, shape)).astype(jnp.bfloat16)
    else:
        values = draw(hnp.arrays(np.dtype(name), shape))
    return normal(values)


def normal(values: np.ndarray) -> np.ndarray:
    """``values`` with subnormal numbers and negative zeros replaced by (positive) zero."""
    if values.dtype.kind == "c":
        return normal(values.real) + 1j * normal(values.imag)
    if values.dtype.kind != "f" and values.dtype != jnp.bfloat16:
        return values
    wide = values.astype(np.float64)
    tiny = float(jnp.finfo(values.dtype).tiny)
    return np.where(np.abs(wide) < tiny, 0.0, wide).astype(values.dtype)


def round_trip(name: str, n: int, es: tuple[int, ...], values: np.ndarray, write: str, read: str) -> Any:
    ta = base(n, es, np_dtype(name))
    if write == "unstack":
        ta = ta.unstack(values)
    elif write == "scatter":
        ta = ta.scatter(np.arange(n)[::-1].copy(), values[::-1].copy())
    else:
        for i in range(n):
            ta = ta.write(i, values[i])
    if read == "stack":
        got = ta.stack()
    elif read == "gather":
        got = ta.gather(np.arange(n))
    elif read == "read":
        got = jnp.stack([ta.read(i) for i in range(n)]) if n else ta.stack()
    else:
        got = ta.concat().reshape((n, *es))
    return np.dtype(ta.dtype).name, got


@pytest.mark.parametrize("x64,width", [case("x64", "narrow"), case("x64", "wide"), case("no_x64", "narrow"),
                                       case("no_x64", "wide")])
@pytest.mark.long
@SETTINGS
@given(data=st.data())
def test_dtypes(x64: str, width: str, data: Any) -> None:
    """Every JAX dtype, with and without x64: the values written come back exactly (NumPy values of
    the array's own dtype are stored as they are, as in TF). Without x64 a 64-bit dtype cannot be
    stored: refusing it (naming the dtype or x64) is fine, narrowing values silently is not."""
    name = data.draw(st.sampled_from(WIDE if width == "wide" else NARROW), label="dtype")
    n = data.draw(st.sampled_from([0, 1, 3]), label="size")
    es = data.draw(st.sampled_from([(), (2,)]), label="element_shape")
    write = data.draw(st.sampled_from(["unstack", "write", "scatter"]), label="write")
    read = data.draw(st.sampled_from(["stack", "gather", "read"] + (["concat"] if es else [])), label="read")
    values = data.draw(values_of(name, (n, *es)), label="values")
    with jax.enable_x64(x64 == "x64"):
        out = attempt(lambda: round_trip(name, n, es, values, write, read))
    what = f"TensorArray({name}, size={n}, element_shape={es}).{write}({_short(values)}).{read}() [{x64}]"
    if x64 == "x64" or width == "narrow":
        judge(out, what, value=(name, values), may_raise=False)
    elif judge(out, what, words=("x64", "64", name)) == "ok":
        stored = np.asarray(out.value[1])
        want = values.astype(stored.dtype)
        same(stored, want, what)  # the 32-bit values (JAX's canonical dtype) ...
        exact = want.astype(values.dtype)  # ... must be the values written (no wrap, no overflow to inf)
        if not np.array_equal(np.isfinite(exact) if exact.dtype.kind in "fc" else exact,
                              np.isfinite(values) if values.dtype.kind in "fc" else values):
            pytest.fail(f"VIOLATION (silently narrowed) {what}: stored {_short(stored)}")


@pytest.mark.parametrize("method", [
    case("write"),
    case("unstack"),
    case("scatter"),
    case("split"),
    case("raw_scatter"),
])
@pytest.mark.long
@SETTINGS
@given(data=st.data())
def test_signed_zeros_and_subnormals(method: str, data: Any) -> None:
    """-0.0 and subnormal numbers (float16 ... complex64) are values like any other: TensorFlow
    stores them as written, so the array must give them back bit for bit (sign of zero included)."""
    name = data.draw(st.sampled_from(["float16", "bfloat16", "float32", "complex64"]), label="dtype")
    dt = np_dtype(name)
    tiny = float(jnp.finfo(dt).tiny)
    pool = [-0.0, tiny / 2, -tiny / 4, tiny / 64, 1.0, -0.0]
    n = data.draw(st.sampled_from([1, 3]), label="size")
    picks = [data.draw(st.sampled_from(pool), label="value") for _ in range(n)]
    values = np.array(picks, np.float64).astype(np.float32).astype(dt)
    if name == "complex64":
        values = values * np.complex64(1) + 1j * values[::-1].astype(np.float32)
    context = data.draw(DRAWN_CONTEXTS, label="context")

    def program() -> Any:
        ta = base(n, (), dt)
        if method == "write":
            for i in range(n):
                ta = ta.write(i, values[i])
        elif method == "unstack":
            ta = ta.unstack(values)
        elif method == "scatter":
            ta = ta.scatter(np.arange(n)[::-1].copy(), values[::-1].copy())
        elif method == "split":
            ta = jta.TensorArray(dt, size=n, element_shape=(1,)).split(values, [1] * n)
            return ta.concat()
        else:
            state, h, flow = ops.TensorArrayV3(ops.new_state(), n, dt, element_shape=())
            state, flow = ops.TensorArrayScatterV3(state, h, np.arange(n), values, flow)
            return ops.TensorArrayGatherV3(state, h, np.arange(n), flow, dt, element_shape=())[1]
        return ta.stack()

    out = attempt(lambda: in_context(context, program, ("tiny", method, name, n, values.tobytes())))
    judge(out, f"{method} of {_short(values)} into TensorArray({name}) [{context}]", value=values, may_raise=False)


@pytest.mark.parametrize("x64", [case("x64"), case("no_x64")])
@pytest.mark.long
@SETTINGS
@given(data=st.data())
def test_python_scalar_traced(x64: str, data: Any) -> None:
    """A Python scalar passed to ``jax.jit`` is a weakly typed tracer (float64 under x64): writing it
    gives what writing the Python scalar eagerly gives, for every dtype."""
    kind = data.draw(st.sampled_from(["int", "float", "complex"]), label="kind")  # (a traced bool is not weak)
    half = data.draw(st.integers(-256, 256), label="value")
    s: Any = {"int": half, "float": half / 2, "complex": complex(half / 2, 1)}[kind]
    names = [d for d in ALL_DTYPES if x64 == "x64" or d not in WIDE]
    with jax.enable_x64(x64 == "x64"):
        eager = {d: attempt(lambda d=d: base(2, (), np_dtype(d), checks=False).write(0, s).stack()) for d in names}
        fn, trace_errors = _scalar_writer(tuple(names), x64 == "x64", kind)
        out = attempt(lambda: fn(s))
    for d in names:
        what = f"jit(lambda s: TensorArray({d}).write(0, s))({s!r}) [{x64}]"
        if d in trace_errors:
            got = Outcome(error=trace_errors[d])
        elif out.error is not None:
            got = out
        else:
            got = Outcome(value=out.value[d])
        if eager[d].error is None:
            judge(got, what, value=eager[d].value, may_raise=False)
        else:
            judge(got, what, words=("dtype",), must_raise=True)


_SCALAR_WRITERS: dict[Any, Any] = {}


def _scalar_writer(names: tuple[str, ...], x64: bool, kind: str
                   ) -> tuple[Callable[[Any], Any], dict[str, BaseException]]:
    """One compiled function (per kind of Python scalar, so per trace) writing its argument into
    an array of each dtype; the trace-time errors per dtype are kept beside it."""
    if (names, x64, kind) not in _SCALAR_WRITERS:
        errors: dict[str, BaseException] = {}

        def write_all(s: Any) -> dict[str, Any]:
            outs = {}
            for d in names:
                try:
                    outs[d] = base(2, (), np_dtype(d), checks=False).write(0, s).stack()
                except Exception as e:  # noqa: BLE001 - judged per dtype
                    errors[d] = e
            return outs

        _SCALAR_WRITERS[(names, x64, kind)] = (jta.checked(jax.jit(write_all)), errors)
    return _SCALAR_WRITERS[(names, x64, kind)]


# -- values written ------------------------------------------------------------------------------

# Probed on TF 2.21 (tf.TensorArray.write of a Python value: convert_to_tensor with the array's
# dtype preferred): None -> ValueError "None values not supported."; object(), ragged lists ->
# TypeError/ValueError; ints beyond int64 -> converted for float arrays (2**70 -> 1.18e21),
# OverflowError for int arrays; Python floats into int/bool arrays and ints into bool arrays ->
# InvalidArgumentError (dtype); out-of-range ints into narrower int arrays wrap (300 -> uint8 44).
ODD_VALUES = {
    "none": [None],
    "object": [object(), {"a": 1}, [1, None], [[1.0], [1.0, 2.0]], {1, 2}, slice(1)],
    "string": ["x", "1.5", b"1", np.str_("2")],
    "huge_int": [2**63, 2**64, 2**70, -2**70],
    "beyond_float": [2**1030, -2**1030],  # beyond float64 too
    "special_float": [float("nan"), float("inf"), -float("inf"), 0.0, 1e40, 1e-50, 65504.0, 70000.0],
}


def tf_converted(value: Any, name: str) -> Any:
    """TensorFlow's value for a Python number written into a ``name`` array, or ``None`` when it raises."""
    dt = np_dtype(name)
    target = "f" if name == "bfloat16" else "i" if dt.kind == "u" else dt.kind
    kind = "f" if isinstance(value, float) else "i"
    if "bifc".index(kind) > "bifc".index(target):
        return None  # a dtype error
    if kind == "i" and target in "fc":
        if abs(value) >= 2**1024:
            return None  # OverflowError in TF
        value, kind = float(value), "f"
    if kind == "i" and not -2**63 <= value < 2**64:
        return None  # OverflowError in TF
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if kind == "i":
            return np.array(value, np.uint64 if value >= 2**63 else np.int64).astype(dt)
        return np.array(value, np.float64).astype(dt)


@pytest.mark.parametrize("group,apis", [
    case(group, apis) for group in ODD_VALUES for apis in ("methods", "raw")])
@pytest.mark.long
@SETTINGS
@given(data=st.data())
def test_values_written(group: str, apis: str, data: Any) -> None:
    """Odd Python values written (write, unstack of a list, scatter) into arrays of every dtype: TF's
    converted value, or an error whose text says what is wrong (not "string" for ``None``)."""
    value = data.draw(st.sampled_from(ODD_VALUES[group]), label="value")
    name = data.draw(st.sampled_from(NARROW), label="dtype")
    api = data.draw(st.sampled_from(["write", "unstack", "scatter"]), label="api") if apis == "methods" else "raw"

    def program() -> Any:
        if api == "write":
            return base(1, None, np_dtype(name)).write(0, value).stack()
        if api == "unstack":
            return base(1, None, np_dtype(name)).unstack([value]).stack()
        if api == "scatter":
            return base(1, None, np_dtype(name)).scatter([0], [value]).stack()
        state, h, flow = ops.TensorArrayV3(ops.new_state(), 1, np_dtype(name))
        state, flow = ops.TensorArrayWriteV3(state, h, 0, value, flow)
        return ops.TensorArrayGatherV3(state, h, [0], flow, np_dtype(name))[1]

    out = attempt(program)
    what = f"TensorArray({name}).{api}({value!r})"
    if group in ("none", "object", "string"):
        unless = ("string",) if group != "string" else ()
        words = {"none": ("none",), "object": ("convert", "shape", "sequence", "none", "type"),
                 "string": ("string", "dtype", "type")}[group]
        judge(out, what, words=words, must_raise=True, unless=unless)
        return
    want = None if api == "raw" else tf_converted(value, name)  # the raw ops keep the value's own dtype
    if want is None:
        judge(out, what, words=("dtype", "type", "convert", "overflow", "large", "range", "int"),
              must_raise=api != "raw", unless=("string",))
    else:
        judge(out, what, value=np.asarray(want)[None], words=("dtype", "convert", "overflow", "large", "range"),
              unless=("string",))


# -- element shapes ------------------------------------------------------------------------------

@st.composite
def element_shapes(draw: Any, form: str) -> tuple[Any, tuple[int, ...]]:
    """``(element_shape spec, the rows' true shape)`` for ``form``."""
    if form == "zero_size":
        rows = draw(st.sampled_from([(0,), (0, 2), (2, 0), (1, 0, 3)]))
    else:
        rows = draw(st.sampled_from([(), (2,), (1, 3), (2, 2)]))
    if form in ("known", "zero_size") and draw(st.booleans()):
        spec: Any = rows if draw(st.booleans()) else list(rows)
    elif form == "unknown":
        spec = None
    else:  # partial: some dims unknown (None or -1)
        if not rows:
            rows = (2,)
        spec = [draw(st.sampled_from([d, None, -1])) for d in rows]
        if all(isinstance(d, int) and d >= 0 for d in spec):
            spec[0] = None
    return spec, rows


def _known(spec: Any) -> bool:
    return spec is not None and all(d is not None and d >= 0 for d in spec)


@pytest.mark.parametrize("form", [case("known"), case("partial"), case("unknown"), case("zero_size")])
@pytest.mark.long
@SETTINGS
@given(data=st.data())
def test_element_shapes(form: str, data: Any) -> None:
    """Known, partial (None/-1 dims), unknown and zero-size element shapes, with infer_shape on or
    off, rows of the right or a wrong shape: NumPy's stack/concatenate, or an error naming the shape."""
    spec, rows = data.draw(element_shapes(form), label="element_shape")
    n = data.draw(st.sampled_from([0, 1, 3]), label="size")
    infer = data.draw(st.booleans(), label="infer_shape")
    wrong = data.draw(st.sampled_from([None, None, None] + list(range(n))), label="wrong_row")
    other = data.draw(st.sampled_from([(), (3,), (2, 1), (0,)]).filter(lambda s: s != rows), label="other")
    read = data.draw(st.sampled_from(["stack", "concat", "gather", "read", "size"]), label="read")
    context = data.draw(DRAWN_CONTEXTS, label="context")
    vals = [np.full(other if k == wrong else rows, k, F32) for k in range(n)]

    def program() -> Any:
        ta = jta.TensorArray(jnp.float32, size=n, element_shape=spec, infer_shape=infer)
        for k, v in enumerate(vals):
            ta = ta.write(k, v)
        if read == "stack":
            return ta.stack()
        if read == "concat":
            return ta.concat()
        if read == "gather":
            return ta.gather(np.arange(n)[::-1].copy())
        if read == "read":
            return ta.read(n - 1) if n else ta.stack()
        return ta.size()

    key = ("shapes", repr(spec), n, infer, wrong, other, read, rows)
    out = attempt(lambda: in_context(context, program, key))
    what = (f"TensorArray(size={n}, element_shape={spec!r}, infer_shape={infer}) rows {rows}"
            f"{f', row {wrong} of shape {other}' if wrong is not None else ''}; {read}() [{context}]")
    words = ("shape", "scalar", "vector", "defined", "rank")
    if read == "size":
        spec_ok = spec is None or (len(spec) == len(rows) and all(d in (None, -1, r) for d, r in zip(spec, rows, strict=True)))
        if wrong is None and spec_ok:
            judge(out, what, value=np.int32(n), may_raise=False)
        else:
            judge(out, what, words=words, value=np.int32(n))
        return
    if wrong is not None:
        # Ragged rows: refused at the write (shape), or by the read (inconsistent shapes); concat of
        # rows that agree after dim 0 may work (TF's infer_shape=False).
        want: Any = NOTHING
        if read == "concat" and all(v.ndim >= 1 and v.shape[1:] == vals[0].shape[1:] for v in vals):
            want = np.concatenate(vals)
        elif read == "read":
            want = vals[-1]
        judge(out, what, words=words, value=want)
        return
    if n == 0:
        if read in ("stack", "gather", "read"):
            full = _known(spec)
            judge(out, what, words=words, value=np.zeros((0, *rows), F32), may_raise=not full,
                  must_raise=not full and read != "gather")
        elif spec is not None and len(spec) == 0:  # TF: (0,) with infer_shape=False, IndexError in its Python else
            judge(out, what, words=words, value=np.zeros((0,), F32))
        else:
            rest_known = spec is not None and _known(spec[1:])
            judge(out, what, words=words, value=np.zeros((0, *rows[1:]), F32), may_raise=not rest_known,
                  must_raise=not rest_known)
        return
    spec_ok = spec is None or (len(spec) == len(rows) and all(d in (None, -1, r) for d, r in zip(spec, rows, strict=True)))
    if not spec_ok:
        judge(out, what, words=words, must_raise=True)
    elif read == "concat" and not rows:
        judge(out, what, words=words, must_raise=True)  # concat needs at least vectors
    else:
        want = {"stack": lambda: np.stack(vals), "concat": lambda: np.concatenate(vals),
                "gather": lambda: np.stack(vals[::-1]), "read": lambda: vals[-1]}[read]()
        judge(out, what, value=want, may_raise=False)


# -- transforms ----------------------------------------------------------------------------------

TRANSFORMS = ("eager", "jit", "disable_jit", "scan", "vmap", "grad")


def _program(n: int, es: tuple[int, ...]) -> Callable[..., Any]:
    """Writes ``values[k]`` at ``order[k]``, then (stack, gather(idx), read(r)); indices are data."""
    def run(order: Any, values: Any, idx: Any, r: Any) -> Any:
        ta = base(n, es)
        for k in range(n):
            ta = ta.write(order[k], values[k])
        return ta.stack(), ta.gather(idx), ta.read(r)
    return run


def _scanned(n: int, es: tuple[int, ...]) -> Callable[..., Any]:
    def run(order: Any, values: Any, idx: Any, r: Any) -> Any:
        ta, _ = jax.lax.scan(lambda t, kv: (t.write(kv[0], kv[1]), None), base(n, es), (order, values))
        return ta.stack(), ta.gather(idx), ta.read(r)
    return run


@pytest.mark.parametrize("transform", [case(t) for t in TRANSFORMS])
@pytest.mark.long
@SETTINGS
@given(data=st.data())
def test_transforms(transform: str, data: Any) -> None:
    """One program (writes at a random permutation, then stack, gather, read) eagerly, under
    jax.jit with traced indices, jax.disable_jit, in a lax.scan body, batched by jax.vmap (indices
    and values batched) and differentiated by jax.grad: NumPy's answer every time."""
    n = data.draw(st.sampled_from([1, 3]), label="size")
    es = (2,)
    batch = 2 if transform == "vmap" else 1
    orders = [data.draw(st.permutations(range(n)), label="order") for _ in range(batch)]
    values = np.asarray(data.draw(st.lists(st.integers(-9, 9), min_size=batch * n * math.prod(es),
                                           max_size=batch * n * math.prod(es)), label="values"),
                        F32).reshape((batch, n, *es))
    m = 2
    idx = np.asarray([data.draw(st.lists(st.integers(0, n - 1), min_size=m, max_size=m), label="idx")
                      for _ in range(batch)], np.int32)
    r = np.asarray([data.draw(st.integers(0, n - 1), label="r") for _ in range(batch)], np.int32)
    orders_np = np.asarray(orders, np.int32)
    buffers = np.zeros((batch, n, *es), F32)
    for b in range(batch):
        buffers[b, orders_np[b]] = values[b]
    want = tuple((buffers[b], buffers[b][idx[b]], buffers[b][r[b]]) for b in range(batch))
    what = f"writes at {orders} of {_short(values)}; gather({idx.tolist()}), read({r.tolist()}) [{transform}]"
    key = (n, es, m)
    if transform == "eager":
        out = attempt(lambda: _program(n, es)([int(i) for i in orders[0]], values[0], idx[0], int(r[0])))
    elif transform == "jit":
        out = attempt(lambda: compiled(("prog",) + key, lambda: _program(n, es))(orders_np[0], values[0], idx[0], r[0]))
    elif transform == "disable_jit":
        def go() -> Any:
            with jax.disable_jit():
                return jta.checked(jax.jit(_program(n, es)))(orders_np[0], values[0], idx[0], r[0])
        out = attempt(go)
    elif transform == "scan":
        out = attempt(lambda: compiled(("scan",) + key, lambda: _scanned(n, es))(orders_np[0], values[0], idx[0], r[0]))
    elif transform == "vmap":
        out = attempt(lambda: compiled(("vmap",) + key, lambda: jax.vmap(_program(n, es)))(orders_np, values, idx, r))
        if out.error is None:
            out.value = tuple(tuple(np.asarray(x)[b] for x in out.value) for b in range(batch))
        judge(out, what, value=want, may_raise=False)
        return
    else:  # grad of a weighted sum of the three results with respect to the values
        w = [np.arange(1, 1 + np.prod(x.shape), dtype=F32).reshape(x.shape) for x in want[0]]

        def loss(v: Any, order: Any, ix: Any, rr: Any, ws: Any) -> Any:
            s, g, x = _program(n, es)(order, v, ix, rr)
            return jnp.sum(ws[0] * s) + jnp.sum(ws[1] * g) + jnp.sum(ws[2] * x)
        out = attempt(lambda: compiled(("grad",) + key, lambda: jax.grad(loss))(values[0], orders_np[0], idx[0], r[0],
                                                                                w))
        grad = np.zeros((n, *es), F32)
        for k in range(n):
            slot = orders[0][k]
            grad[k] = w[0][slot] + sum(w[1][j] for j in range(m) if idx[0][j] == slot) + (w[2] if r[0] == slot else 0)
        judge(out, what, value=grad, may_raise=False)
        return
    judge(out, what, value=want[0], may_raise=False)


VMAP_OUT_METHODS = ("stack", "read", "gather", "concat", "size", "write", "scatter", "unstack", "split",
                    "close", "grad", "throw", "repr", "jit", "vmap_again")


def _vmapped(n: int) -> jta.TensorArray:
    return compiled(("vmapped-build", n), lambda: jax.vmap(lambda v: base(n, (2,)).unstack(v)))


@pytest.mark.parametrize("method", [case(m) for m in VMAP_OUT_METHODS])
@pytest.mark.long
@SETTINGS
@given(data=st.data())
def test_vmap_out(method: str, data: Any) -> None:
    """An array returned by jax.vmap (a batch of arrays) used outside vmap: each method answers for
    every batch member or refuses, naming vmap/batch; never swapped rows or an internal error.
    ``vmap_again`` (mapping over it once more) must work."""
    n = data.draw(st.sampled_from([1, 3]), label="size")
    values = np.arange(2 * n * 2, dtype=F32).reshape(2, n, 2) * data.draw(st.sampled_from([1, -1]), label="sign")
    i = data.draw(st.integers(0, n - 1), label="i")
    ta = _vmapped(n)(values)
    batched = np.stack([values[0], values[1]])
    x = np.full((2,), 99.0, F32)
    programs: dict[str, Callable[[], Any]] = {
        "stack": lambda: ta.stack(), "read": lambda: ta.read(i), "gather": lambda: ta.gather([i]),
        "concat": lambda: ta.concat(), "size": lambda: ta.size(),
        "write": lambda: ta.write(n, x), "scatter": lambda: ta.scatter([i], x[None]),
        "unstack": lambda: ta.unstack(values[0]), "split": lambda: ta.split(values[0].reshape(-1), [2] * n),
        "close": lambda: ta.close(), "grad": lambda: ta.grad("gradients", {})[1],
        "throw": lambda: jta.throw(ta), "repr": lambda: (repr(ta), ta._repr_html_()),
        "jit": lambda: jax.jit(lambda t: t.stack())(ta),
        "vmap_again": lambda: jax.vmap(lambda t: t.stack())(ta),
    }
    wants: dict[str, Any] = {
        "stack": batched, "read": batched[:, i], "gather": batched[:, [i]], "concat": batched.reshape(2, -1),
        "size": np.array([n, n], np.int32), "jit": batched, "vmap_again": batched,
    }
    out = attempt(programs[method])
    what = f"jax.vmap(lambda v: TensorArray(size={n}).unstack(v))(values).{method}(...) outside vmap"
    if method in ("repr", "throw"):
        judge(out, what, may_raise=False)
    elif method == "vmap_again":
        judge(out, what, value=batched, may_raise=False)
    elif method in wants:
        judge(out, what, words=("vmap", "batch"), value=wants[method])
    elif method in ("write", "scatter", "unstack", "split"):
        # every slot is written: each member would refuse these (written twice / sizes), so must the batch
        judge(out, what, words=("vmap", "batch", "written", "size"), must_raise=True)
    elif judge(out, what, words=("vmap", "batch")) == "ok" and not isinstance(out.value, jta.TensorArray):
        pytest.fail(f"VIOLATION (not an array) {what}: {out}")


# -- creation arguments --------------------------------------------------------------------------

# size: TF converts with convert_to_tensor(size, int32): bools and NumPy numbers are cast (True is 1,
# np.float32(2.5) is 2), Python floats/strings/None are refused.
SIZE_KINDS: dict[str, Callable[[Any], Any]] = {
    "int": lambda d: (d.draw(st.sampled_from([0, 1, 3])),) * 2,
    "np_int": lambda d: _np_int_size(d),
    "jax_int": lambda d: (jnp.asarray(d.draw(st.sampled_from([0, 1, 3]))), None),
    "bool": lambda d: (lambda b: (d.draw(st.sampled_from([b, np.bool_(b)])), int(b)))(d.draw(st.booleans())),
    "np_float_integral": lambda d: (lambda v: (np.dtype(d.draw(st.sampled_from(["float16", "float32", "float64"])))
                                               .type(v), v))(d.draw(st.sampled_from([0, 1, 3]))),
    "np_float_fraction": lambda d: (np.float32(d.draw(st.sampled_from([0.5, 2.5, 3.9]))), None),
    "py_float": lambda d: (d.draw(st.sampled_from([0.0, 2.0, 2.5])), None),
    "refused": lambda d: (d.draw(st.sampled_from(["2", None, [2], np.array([2]), object(), -1, np.int8(-3), 2j])),
                          None),
}


def _np_int_size(d: Any) -> tuple[Any, int]:
    v = d.draw(st.sampled_from([0, 1, 3]))
    return np.dtype(d.draw(st.sampled_from(INT_DTYPES))).type(v), v


@pytest.mark.parametrize("kind", [case(k) for k in SIZE_KINDS])
@pytest.mark.long
@SETTINGS
@given(data=st.data())
def test_size_kinds(kind: str, data: Any) -> None:
    """``size=`` of every kind, through jta.TensorArray and raw_ops.TensorArrayV3: the size TF
    uses (bools and NumPy numbers are cast), or an error naming the size (Python floats, strings,
    None, vectors, negatives); never a ValueError for a value TF accepts."""
    size, n = SIZE_KINDS[kind](data)
    if kind == "jax_int":
        n = int(size)
    api = data.draw(st.sampled_from(["TensorArray", "raw"]), label="api")

    def program() -> Any:
        if api == "raw":
            state, h, flow = ops.TensorArrayV3(ops.new_state(), size, jnp.float32, element_shape=())
            return ops.TensorArraySizeV3(state, h, flow)[1], ops.TensorArrayGatherV3(
                state, h, np.arange(int(ops.TensorArraySizeV3(state, h, flow)[1])), flow, jnp.float32,
                element_shape=())[1]
        ta = jta.TensorArray(jnp.float32, size=size, element_shape=())
        return ta.size(), ta.stack()

    out = attempt(program)
    what = f"{api}(size={size!r})"
    if kind in ("int", "np_int", "jax_int", "bool", "np_float_integral"):
        judge(out, what, value=(np.int32(n), np.zeros(n, F32)), may_raise=False)
    elif kind == "np_float_fraction":
        judge(out, what, words=("size",), value=(np.int32(int(size)), np.zeros(int(size), F32)))
    else:
        judge(out, what, words=("size",), must_raise=True)


DTYPE_SPECS: dict[str, list[Any]] = {
    "jax": [getattr(jnp, d) for d in ALL_DTYPES],
    "numpy": [np_dtype(d) for d in ALL_DTYPES],
    "name": list(ALL_DTYPES),
    "python_float": [float],
    "python_other": [bool, complex, int],
    "invalid": [None, object, str, bytes, "foo", 3, np.str_, np.object_, np.void, "U", "O", "datetime64[s]",
                [np.float32], "float128", np.dtype("V8")],
}


@pytest.mark.parametrize("group", [case(g) for g in DTYPE_SPECS])
@pytest.mark.long
@SETTINGS
@given(data=st.data())
def test_dtype_specs(group: str, data: Any) -> None:
    """``dtype=`` given as a JAX type, a NumPy dtype, a name, a Python type or something that is
    not a dtype (None, object, str, 'foo', 3, ...): a working array of that dtype (64-bit ones
    with x64), or a TypeError/ValueError naming the dtype at creation or at the first op; never
    a silent float32 for None, never an internal error later."""
    spec = data.draw(st.sampled_from(DTYPE_SPECS[group]), label="dtype")
    x64 = data.draw(st.booleans(), label="x64")
    api = data.draw(st.sampled_from(["TensorArray", "raw"]), label="api")

    def program() -> Any:
        if api == "raw":
            state, h, flow = ops.TensorArrayV3(ops.new_state(), 2, spec, element_shape=())
            dt = state[h].dtype
            state, flow = ops.TensorArrayWriteV3(state, h, 0, np.ones((), dt), flow)
            return np.dtype(dt).name, ops.TensorArrayGatherV3(state, h, [0, 1], flow, spec)[1]
        ta = jta.TensorArray(spec, size=2, element_shape=())
        return np.dtype(ta.dtype).name, ta.write(0, np.ones((), ta.dtype)).stack()

    with jax.enable_x64(x64):
        out = attempt(program)
    what = f"{api}(dtype={spec!r}) [x64={x64}]"
    if group == "invalid":
        judge(out, what, words=("dtype", "type"), must_raise=True)
        return
    if group.startswith("python"):
        # TF: float is float32, bool is bool; int and complex are refused (TypeError), so jta may
        # refuse them too or take NumPy's meaning (int64/complex128, 32-bit without x64).
        if judge(out, what, words=("dtype", "type")) == "error":
            return
        name = {float: "float32", bool: "bool"}.get(spec) or np.dtype(
            spec if x64 else {int: np.int32, complex: np.complex64}[spec]).name
    else:
        name = np_dtype(spec if isinstance(spec, str) else np.dtype(spec).name).name
    if name in WIDE and not x64:
        judge(out, what, words=("x64", "64", name), must_raise=True)
    else:
        judge(out, what, value=(name, np.array([1, 0]).astype(np_dtype(name))), may_raise=False)


# -- shape_to_prepend ----------------------------------------------------------------------------

PREPENDS: dict[str, list[Any]] = {
    "valid": [[], (), [0], [1], [2], (2, 3), np.array([2]), np.array([2], np.int64), jnp.array([3]),
              [np.int64(2)], np.array([], np.int32)],
    "bool": [[True], [False, True]],
    "invalid": [[-1], [-5], [2.5], None, "2", [None], [object()], np.array([2.5]), jnp.array([2.0]), [2, -1], 2.5],
    "nested": [[[2]], np.array([[2]]), [[2], [3]]],
    "traced": ["traced"],
}


@pytest.mark.parametrize("group", [
    case(g) for g in PREPENDS])
@pytest.mark.long
@SETTINGS
@given(data=st.data())
def test_shape_to_prepend(group: str, data: Any) -> None:
    """``shape_to_prepend`` of ``ta.grad`` and ``TensorArrayGradWithShape``: an accumulator whose
    elements are ``[*prepend, *element_shape]``, or an error naming it (negative, fractional,
    None, nested, strings, traced)."""
    stp = data.draw(st.sampled_from(PREPENDS[group]), label="shape_to_prepend")
    n = data.draw(st.sampled_from([0, 2]), label="size")
    es = data.draw(st.sampled_from([(), (3,)]), label="element_shape")
    api = data.draw(st.sampled_from(["ta.grad", "raw"]), label="api")

    def accumulator(prepend: Any) -> Any:
        if api == "raw":
            state, h, flow = ops.TensorArrayV3(ops.new_state(), n, jnp.float32, element_shape=es)
            state, g, flow = ops.TensorArrayGradWithShape(state, h, flow, prepend, "gradients")
            dims = tuple(int(d) for d in np.asarray(prepend).reshape(-1))
            return ops.TensorArrayGatherV3(state, g, np.arange(n), flow, jnp.float32, element_shape=(*dims, *es))[1]
        _, g, _ = base(n, es).grad("gradients", {}, shape_to_prepend=prepend)
        return g.gather(np.arange(n))

    if group == "traced":
        out = attempt(lambda: jta.checked(jax.jit(accumulator))(jnp.array([2])))
    else:
        out = attempt(lambda: accumulator(stp))
    what = f"{api} shape_to_prepend={stp!r} (size {n}, element_shape {es})"
    words = ("shape_to_prepend", "dimension", "shape", "static")
    if group == "valid":
        dims = tuple(int(d) for d in np.asarray(stp).reshape(-1))
        judge(out, what, value=np.zeros((n, *dims, *es), F32), may_raise=False)
    elif group == "bool":
        dims = tuple(int(d) for d in np.asarray(stp).reshape(-1))
        judge(out, what, value=np.zeros((n, *dims, *es), F32), words=words)
    else:
        judge(out, what, words=words, must_raise=True)


# -- repr ----------------------------------------------------------------------------------------

TREE_MAPS: dict[str, Callable[[Any], Any]] = {
    "double": lambda x: x * 2, "numpy": np.asarray, "shape": lambda x: x.shape, "dtype": lambda x: x.dtype,
    "struct": lambda x: jax.ShapeDtypeStruct(x.shape, x.dtype), "none": lambda x: None, "str": str,
    "int": lambda x: 0, "object": lambda x: object(), "add_axis": lambda x: x[None],
    "float16": lambda x: x.astype(jnp.float16), "list": lambda x: [x],
}


@pytest.mark.parametrize("mapping", [case(m) for m in TREE_MAPS])
@pytest.mark.long
@SETTINGS
@given(data=st.data())
def test_repr_of_tree_mapped(mapping: str, data: Any) -> None:
    """``repr``/``_repr_html_`` of an array (dense or per-slot, plain, accumulator, closed, vmapped,
    raw-op state) after ``jax.tree.map(f, ...)``: a string, never an exception."""
    shape_known = data.draw(st.booleans(), label="element_shape known")
    n = data.draw(st.sampled_from([0, 40]), label="size")
    form = data.draw(st.sampled_from(["plain", "grad", "closed", "vmapped", "state", "eval_shape"]), label="form")
    es = (2,) if shape_known else None
    ta = base(n, es)
    if n:
        ta = ta.write(0, np.ones(2, F32))
    if form == "grad":
        ta = ta.grad("gradients", {})[1]
    elif form == "closed":
        ta = ta.close()
    elif form == "vmapped" and shape_known:
        ta = jax.vmap(lambda v: base(n, es).unstack(v))(np.ones((2, n, 2), F32))
    tree: Any = ta
    if form == "state":
        tree = ops.TensorArrayV3(ops.new_state(), n, jnp.float32, element_shape=es)[0]
    elif form == "eval_shape":
        tree = jax.eval_shape(lambda: ta)
    try:
        mapped = jax.tree.map(TREE_MAPS[mapping], tree)
    except Exception:  # noqa: BLE001 - the mapping does not apply to these leaves (e.g. x * 2 of a ShapeDtypeStruct)
        reject()
    out = attempt(lambda: (repr(mapped), mapped._repr_html_()))
    judge(out, f"repr(jax.tree.map({mapping}, {form} array of size {n}, element_shape {es}))", may_raise=False)


# -- impossible sizes: refused or lazy, never allocated -----------------------------------------

# Each case is evaluated in a child process whose address space is capped (RLIMIT_AS) and whose
# every case has an alarm: first abstractly (jax.eval_shape: no buffers), and only when that
# refuses it, or shows small buffers (a lazy array), for real. A case whose abstract buffers
# exceed LARGE_BYTES is reported without being run.
LARGE_BYTES = 256 << 20
LARGE_CASES = {
    "size=10**9": "jta.TensorArray(jnp.float32, size=10**9, element_shape=())",
    "size=2**31-1": "jta.TensorArray(jnp.float32, size=2**31 - 1, element_shape=())",
    "size=2**31": "jta.TensorArray(jnp.float32, size=2**31, element_shape=())",
    "size=2**40": "jta.TensorArray(jnp.float32, size=2**40, element_shape=())",
    "size=2**63": "jta.TensorArray(jnp.float32, size=2**63, element_shape=())",
    "size=2**70": "jta.TensorArray(jnp.float32, size=2**70, element_shape=())",
    "size=np.int64(2**40)": "jta.TensorArray(jnp.float32, size=np.int64(2**40), element_shape=())",
    "size=10**9,unknown-shape": "jta.TensorArray(jnp.float32, size=10**9)",
    "size=10**9,partial-shape": "jta.TensorArray(jnp.float32, size=10**9, element_shape=(None,))",
    "raw-size=10**9": "ops.TensorArrayV3(ops.new_state(), 10**9, jnp.float32, element_shape=())",
    "raw-size=2**40": "ops.TensorArrayV3(ops.new_state(), 2**40, jnp.float32, element_shape=())",
    "capacity=10**9": "jta.TensorArray(jnp.float32, size=0, dynamic_size=True, capacity=10**9, element_shape=())",
    "capacity=2**40": "jta.TensorArray(jnp.float32, size=0, dynamic_size=True, capacity=2**40, element_shape=())",
    "element_shape=(10**5,10**5)": "jta.TensorArray(jnp.float32, size=1, element_shape=(10**5, 10**5))",
    "element_shape=(2**40,)": "jta.TensorArray(jnp.float32, size=1, element_shape=(2**40,))",
    "dynamic-write-at-10**9": "jta.TensorArray(jnp.float32, size=0, dynamic_size=True, element_shape=())"
                              ".write(10**9, 1.0)",
    "dynamic-write-at-2**31": "jta.TensorArray(jnp.float32, size=0, dynamic_size=True, element_shape=())"
                              ".write(2**31, 1.0)",
    "dynamic-scatter-at-10**9": "jta.TensorArray(jnp.float32, size=0, dynamic_size=True, element_shape=())"
                                ".scatter([10**9], [1.0])",
    "dynamic-unknown-shape-write-at-10**9": "jta.TensorArray(jnp.float32, size=0, dynamic_size=True)"
                                            ".write(10**9, 1.0)",
    "grad-shape_to_prepend=[2**40]": "jta.TensorArray(jnp.float32, size=3, element_shape=())"
                                     ".grad('gradients', {}, shape_to_prepend=[2**40])[1]",
    "grad-shape_to_prepend=[10**5,10**5]": "jta.TensorArray(jnp.float32, size=3, element_shape=())"
                                           ".grad('gradients', {}, shape_to_prepend=[10**5, 10**5])[1]",
    "gradient-read-at-10**9": "jta.TensorArray(jnp.float32, size=3, element_shape=())"
                              ".grad('gradients', {})[1].read(10**9)",
}

_LARGE_CHILD = textwrap.dedent('''
    import json, resource, signal, sys
    cap = 3 << 30
    resource.setrlimit(resource.RLIMIT_AS, (cap, cap))
    import jax, jax.numpy as jnp, numpy as np, jta
    from jta import raw_ops as ops
    class Hang(BaseException):
        pass
    def alarm(*_):
        raise Hang("no answer within 30 s")
    signal.signal(signal.SIGALRM, alarm)
    def error(e):
        return {"error": type(e).__module__ + "." + type(e).__name__, "text": str(e).split("\\n-----")[0][:400]}
    for name, src in json.loads(sys.argv[1]).items():
        made = eval("lambda: " + src)
        thunk = lambda: [x for x in jax.tree.leaves(made()) if isinstance(x, jax.Array)]
        signal.alarm(30)
        try:
            try:
                shapes = jax.eval_shape(thunk)
            except BaseException as e:
                first = error(e)
                if not isinstance(e, (jta.errors.TensorArrayError, ValueError, TypeError)):
                    print(json.dumps({"name": name, "stage": "abstract", **first}), flush=True)
                    continue
                try:
                    thunk()
                    result = {"stage": "eager", "returned": "after refusing abstractly: " + first["text"]}
                except BaseException as e:
                    result = {"stage": "eager", **error(e)}
                print(json.dumps({"name": name, **result}), flush=True)
                continue
            nbytes = sum(int(np.prod(x.shape)) * np.dtype(x.dtype).itemsize
                         for x in jax.tree.leaves(shapes) if hasattr(x, "dtype"))
            if nbytes > int(sys.argv[2]):
                print(json.dumps({"name": name, "stage": "abstract", "allocates": nbytes}), flush=True)
                continue
            try:
                jax.block_until_ready(jax.tree.leaves(thunk()))
                result = {"stage": "eager", "returned": "lazy: %d bytes of buffers" % nbytes}
            except BaseException as e:
                result = {"stage": "eager", **error(e)}
            print(json.dumps({"name": name, **result}), flush=True)
        finally:
            signal.alarm(0)
''')


@pytest.fixture(scope="module")
def large_outcomes() -> dict[str, dict[str, Any]]:
    """Every :data:`LARGE_CASES` entry's outcome, from one capped child process."""
    proc = subprocess.run([sys.executable, "-c", _LARGE_CHILD, json.dumps(LARGE_CASES), str(LARGE_BYTES)],
                          capture_output=True, text=True, timeout=600, cwd=str(__import__("pathlib").Path(
                              __file__).resolve().parents[1]))
    outcomes = {}
    for line in proc.stdout.splitlines():
        if line.startswith("{"):
            record = json.loads(line)
            outcomes[record.pop("name")] = record
    for name in LARGE_CASES:
        outcomes.setdefault(name, {"crashed": f"child exited {proc.returncode}: {proc.stderr[-400:]}"})
    return outcomes


LARGE_ALLOWED = ("jta.errors.", "builtins.ValueError", "builtins.TypeError")
LARGE_LEAKED = ("jax.errors.TracerArrayConversionError", "jax.errors.ConcretizationTypeError")


# name -> what happens instead, for a case not yet refused or lazy (a strict xfail). Empty: every
# case is refused before allocating.
LARGE_TODAY: dict[str, str] = {}


@pytest.mark.parametrize("name", [case(n, today=LARGE_TODAY.get(n)) for n in LARGE_CASES])
def test_large_sizes_refused_or_lazy(name: str, large_outcomes: dict[str, dict[str, Any]]) -> None:
    """Sizes, capacities, element shapes, growth and shape_to_prepend that would need gigabytes
    (10**9 slots and beyond): refused quickly with an error naming the size/shape, or lazy; never
    allocated, never a hang, never an internal error."""
    record = large_outcomes[name]
    what = f"{LARGE_CASES[name]}: {record}"
    if "allocates" in record:
        pytest.fail(f"VIOLATION (would allocate {record['allocates'] / 2**30:.1f} GiB; not run) {what}")
    if "crashed" in record:
        pytest.fail(f"VIOLATION (crashed the process) {what}")
    if "returned" in record:
        return  # lazy: small buffers, and it ran
    err, text = record["error"], record["text"]
    if err in ("builtins.MemoryError", "__main__.Hang") or err.endswith("JaxRuntimeError"):
        pytest.fail(f"VIOLATION (tried to allocate: {err}) {what}")
    if not err.startswith(LARGE_ALLOWED) or err in LARGE_LEAKED:
        pytest.fail(f"VIOLATION (leaked {err}) {what}")
    internal = [t for t in INTERNAL_TEXTS if t in text]
    if internal and not err.startswith("jta.errors."):
        pytest.fail(f"VIOLATION (internal {err} {internal[0]!r}) {what}")
    words = ("size", "shape", "capacity", "index", "dimension", "large", "int32")
    if not any(w in text.lower() for w in words):
        pytest.fail(f"VIOLATION (message names none of {words}) {what}")


# -- known hard inputs, one line each ------------------------------------------------------------

def _x64(thunk: Callable[[], Any]) -> Callable[[], Any]:
    def run() -> Any:
        with jax.enable_x64(True):
            return thunk()
    return run


def _raw_write(value: Any) -> Any:
    state, h, flow = ops.TensorArrayV3(ops.new_state(), 1, jnp.float32, element_shape=())
    return ops.TensorArrayWriteV3(state, h, 0, value, flow)[0][h].stack()


def _raw_prepend(shape: Any) -> Any:
    state, h, flow = ops.TensorArrayV3(ops.new_state(), 2, jnp.float32, element_shape=())
    return ops.TensorArrayGradWithShape(state, h, flow, shape, "gradients")[0]


def _batched() -> jta.TensorArray:
    return jax.vmap(lambda x: base(3).write(0, x).write(1, 2 * x))(jnp.arange(2.0))


_IDX = ("index", "indices")
_STP = ("shape_to_prepend", "dimension", "shape", "static")
# id -> (thunk, judge keywords). One line each; ``raise``: TF raises, so must jta (naming the problem).
KNOWN: dict[str, tuple[Callable[[], Any], dict[str, Any]]] = {
    "write-index-1.5": (lambda: base(3).write(1.5, 7.0).stack(), dict(words=_IDX, must_raise=True)),
    "read-index-'1'": (lambda: filled(3).read("1"), dict(words=_IDX, must_raise=True)),
    "write-index-None": (lambda: base(3).write(None, 7.0).stack(), dict(words=_IDX, must_raise=True)),
    "write-index-True": (lambda: base(3).write(True, 7.0).stack(), dict(words=_IDX, value=np.array([0, 7, 0], F32))),
    "jit-read-float32-index": (lambda: jta.checked(jax.jit(lambda i: filled(3).read(i)))(jnp.float32(1.0)),
                               dict(words=_IDX, must_raise=True)),
    "gather-[0.5]": (lambda: filled(3).gather([0.5]), dict(words=_IDX, must_raise=True)),
    "jit-scatter-[-1]-size-0": (lambda: jta.checked(jax.jit(lambda: base(0).scatter([-1], np.ones(1, F32)).stack()))(),
                                dict(words=_IDX, must_raise=True)),
    "scan-scatter-[int16-min]-size-0": (
        lambda: in_context("scan", lambda: base(0).scatter([np.int16(-32768)], np.ones(1, F32)).stack()),
        dict(words=_IDX, must_raise=True)),
    "int64-without-x64-2**40": (lambda: jta.TensorArray(jnp.int64, size=1, element_shape=()).write(0, 2**40).stack(),
                                dict(words=("x64", "int64"), must_raise=True)),
    "float64-without-x64-1e300": (lambda: jta.TensorArray(jnp.float64, size=1, element_shape=()).write(0, 1e300).stack(),
                                  dict(words=("x64", "float64"), must_raise=True)),
    "vmapped-stack-outside": (lambda: _batched().stack(),
                              dict(words=("vmap", "batch"), value=np.array([[0, 0, 0], [1, 2, 0]], F32))),
    "vmapped-read-outside": (lambda: _batched().read(1), dict(words=("vmap", "batch"), value=np.array([0, 2], F32))),
    "vmapped-write-outside": (lambda: _batched().write(2, 1.0), dict(words=("vmap", "batch"), must_raise=True)),
    "shape_to_prepend=[-1]": (lambda: base(2).grad("gradients", {}, [-1])[1].stack(), dict(words=_STP, must_raise=True)),
    "shape_to_prepend=[2.5]": (lambda: base(2).grad("gradients", {}, [2.5])[1].stack(), dict(words=_STP, must_raise=True)),
    "shape_to_prepend=None": (lambda: base(2).grad("gradients", {}, None)[1].stack(), dict(words=_STP, must_raise=True)),
    "shape_to_prepend=[[2]]": (lambda: base(2).grad("gradients", {}, [[2]])[1].stack(),
                               dict(words=_STP, must_raise=True)),
    "raw-shape_to_prepend=[[2]]": (lambda: _raw_prepend([[2]]), dict(words=_STP, must_raise=True)),
    "shape_to_prepend-traced": (lambda: jax.jit(lambda k: base(2).grad("gradients", {}, k)[1].stack())(jnp.array([2])),
                                dict(words=_STP, must_raise=True)),
    "write-None": (lambda: base(1).write(0, None).stack(), dict(words=("none",), must_raise=True, unless=("string",))),
    "write-object()": (lambda: base(1).write(0, object()).stack(),
                       dict(words=("convert", "type"), must_raise=True, unless=("string",))),
    "write-2**70-float32": (lambda: base(1).write(0, 2**70).stack(), dict(value=np.array([2.0**70], F32))),
    "raw-write-2**1030": (lambda: _raw_write(2**1030), dict(words=("convert", "large", "overflow", "int"),
                                                             unless=("string",))),
    "write-2**1030-float32": (lambda: base(1).write(0, 2**1030).stack(),
                              dict(words=("convert", "large", "overflow", "int"), must_raise=True)),
    "write-2**1030-complex64": (lambda: base(1, (), jnp.complex64).write(0, 2**1030).stack(),
                                dict(words=("convert", "large", "overflow", "int"), must_raise=True)),
    "concat-size-0-scalar-elements": (lambda: base(0, (), infer_shape=False).concat(),
                                      dict(words=("shape", "scalar"), value=np.zeros((0,), F32))),
    "dtype=None": (lambda: jta.TensorArray(None, size=2, element_shape=()).stack(),
                   dict(words=("dtype",), must_raise=True)),
    "dtype=object": (lambda: jta.TensorArray(object, size=2, element_shape=()).write(0, 1).stack(),
                     dict(words=("dtype",), must_raise=True)),
    "size=True": (lambda: jta.TensorArray(jnp.float32, size=True, element_shape=()).stack(),
                  dict(value=np.zeros(1, F32), may_raise=False)),
    "size=np.float32(2)": (lambda: jta.TensorArray(jnp.float32, size=np.float32(2), element_shape=()).stack(),
                           dict(value=np.zeros(2, F32), may_raise=False)),
    "x64-jit-weak-float": (_x64(lambda: jax.jit(lambda v: base(3).write(0, v).stack())(1.0)),
                           dict(value=np.array([1, 0, 0], F32), may_raise=False)),
    "repr-tree-map-None": (lambda: repr(jax.tree.map(lambda x: None, base(3))), dict(may_raise=False)),
    "repr-tree-map-str": (lambda: repr(jax.tree.map(str, base(3))), dict(may_raise=False)),
    "repr-tree-map-double-size-0": (lambda: repr(jax.tree.map(lambda x: x * 2, base(0, (2,)))), dict(may_raise=False)),
    "repr-tree-map-numpy-eval_shape": (lambda: repr(jax.tree.map(np.asarray, jax.eval_shape(lambda: base(0, (2,))))),
                                       dict(may_raise=False)),
    "unstack-negative-zero": (lambda: base(1, (), jnp.float16).unstack(np.array([-0.0], np.float16)).stack(),
                              dict(value=np.array([-0.0], np.float16), may_raise=False)),
    "scatter-subnormal": (lambda: base(1).scatter([0], np.array([1e-40], F32)).stack(),
                          dict(value=np.array([1e-40], F32), may_raise=False)),
}


# name -> what happens instead, for an input jta does not handle yet (a strict xfail). Empty: all pass.
KNOWN_TODAY: dict[str, str] = {}


@pytest.mark.parametrize("name", [case(n, today=KNOWN_TODAY.get(n)) for n in KNOWN])
def test_known_inputs(name: str) -> None:
    """Known hard inputs, one line each, so that each keeps TensorFlow's result or a clear error
    whatever the properties happen to draw."""
    thunk, expect = KNOWN[name]
    judge(attempt(thunk), name, **expect)
