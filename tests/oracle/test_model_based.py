"""Model-based test of ``jta.TensorArray`` (hypothesis ``RuleBasedStateMachine``).

A small pure-Python/NumPy reference model (:class:`Model`: a list of slots holding NumPy values
or ``None``, the element shape, size and flags) encodes the functional ``tf.TensorArray`` API as
README and spec describe it for jta: §5.2's Python layer (conversion with ``preferred_dtype``,
``ValueError: Inconsistent shapes`` and shape merging) in front of the kernel checks of §1-§2
in TensorFlow's order (checked against live mode K where the spec is silent), K's error texts,
write-once slots, and a ``read`` that does not clear. Each rule applies one operation — valid
or not — to some version of an array and compares jta with the model: values, dtype, shape,
size and element shape, or the exception class and exact text. Arrays are values, so the
machine keeps every version and an invariant re-checks old ones (they never see later writes).
A rule also writes and reads at *traced* indices through ``jax.jit``: errors are recorded in
the array and raised by ``jta.throw`` (writes) or at run time (reads) with the same text.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import re
from typing import Any, Optional

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import HealthCheck, event, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

import jta
from jta.errors import InvalidArgumentError, UnimplementedError
from tests.helpers import scaled

NAME = "foo"
DTYPES = (np.dtype(np.float32), np.dtype(np.int32))
ELEMENT_SHAPES = ((), (2,), (1, 3), (None,), (None, 3), (1, None), None)
SIZES = (2, 3, 1, 0, 4, 6)
MAX_VERSIONS = 12

# -- the reference model ----------------------------------------------------------------------


class Expected(Exception):
    """The error the model predicts: exception class and exact text."""

    def __init__(self, cls: type[Exception], text: str):
        super().__init__(text)
        self.cls, self.text = cls, text


def compatible(a, b) -> bool:
    return a is None or b is None or (len(a) == len(b) and all(x is None or y is None or x == y
                                                                for x, y in zip(a, b, strict=True)))


def merge(a, b):
    if a is None or b is None:
        return b if a is None else a
    return tuple(y if x is None else x for x, y in zip(a, b, strict=True))


def full(shape) -> bool:
    return shape is not None and None not in shape


def debug(shape) -> str:  # PartialTensorShape::DebugString
    return "<unknown>" if shape is None else "[" + ",".join("?" if d is None else str(d) for d in shape) + "]"


def pystr(shape) -> str:  # str(tf.TensorShape)
    if shape is None:
        return "<unknown>"
    return f"({shape[0]},)" if len(shape) == 1 else "(" + ", ".join(str(d) for d in shape) + ")"


KERNEL_DTYPE = {"float32": "float", "int32": "int32"}


def invalid(text: str) -> Expected:
    return Expected(InvalidArgumentError, text)


@dataclasses.dataclass(frozen=True)
class Model:
    dtype: np.dtype
    size: int
    dynamic: bool
    infer: bool
    es: Optional[tuple]
    slots: tuple  # NumPy value or None per slot
    closed: bool = False

    def _new(self, **kw) -> Model:
        return dataclasses.replace(self, **kw)

    # Python layer (§5.2) ---------------------------------------------------------------------
    def convert(self, value) -> np.ndarray:
        """``convert_to_tensor(value, preferred_dtype=dtype)`` in a graph: a ``jax.Array`` is a tensor
        and keeps its dtype; a NumPy value is cast (``make_tensor_proto`` uses ``astype``); a Python
        value takes the dtype unless that loses its kind (a Python float stays float32)."""
        arr = np.asarray(value)
        if isinstance(value, jax.Array):
            return arr
        if isinstance(value, np.ndarray) or "bifc".index(arr.dtype.kind) <= "bifc".index(self.dtype.kind):
            return arr.astype(self.dtype)
        return arr.astype(np.float32)

    def python_check(self, shape) -> Optional[tuple]:
        """``_check_element_shape``: ValueError, or the element shape after merging."""
        if not compatible(shape, self.es):
            raise Expected(ValueError, f"Inconsistent shapes: saw {pystr(shape)} but expected {pystr(self.es)} ")
        return merge(self.es, shape) if self.infer else self.es

    # kernel (§1-§2) --------------------------------------------------------------------------
    def check_dtype(self, value: np.ndarray) -> None:
        if value.dtype != self.dtype:
            raise invalid(f"TensorArray dtype is {KERNEL_DTYPE[self.dtype.name]} but Op is trying to write "
                          f"dtype {KERNEL_DTYPE[value.dtype.name]}.")

    def check_open(self) -> None:
        if self.closed:
            raise invalid(f"TensorArray {NAME} has already been closed.")

    def kernel_write(self, slots: list, es, i: int, value: np.ndarray, size: int):
        """WriteOrAggregate (§1.3) after the closed check: returns the kernel's element shape."""
        if i < 0 or (not self.dynamic and i >= size):
            raise invalid(f"TensorArray {NAME}: Tried to write to index {i} but array is not resizeable "
                          f"and size is: {size}")
        slots.extend([None] * (i + 1 - len(slots)))
        if not compatible(es, value.shape):
            raise invalid(f"TensorArray {NAME}: Could not write to TensorArray index {i} because the value "
                          f"shape is {debug(value.shape)} which is incompatible with the TensorArray's inferred "
                          f"element shape: {debug(es)} (consider setting infer_shape=False).")
        if self.infer and not full(es):
            es = value.shape
        if slots[i] is not None:
            raise invalid(f"TensorArray {NAME}: Could not write to TensorArray index {i} because it has "
                          "already been written to.")
        slots[i] = value
        return es

    def read_slot(self, i: int) -> np.ndarray:
        if i < 0 or i >= self.size:
            raise invalid(f"Tried to read from index {i} but array size is: {self.size}")
        if self.slots[i] is not None:
            return self.slots[i]
        if full(self.es):
            return np.zeros(self.es, self.dtype)
        raise invalid(
            f"TensorArray {NAME}: Could not read from TensorArray index {i}.  Furthermore, the element shape "
            f"is not fully defined: {debug(self.es)}.  It is possible you are working with a resizeable "
            "TensorArray and stop_gradients is not allowing the gradients to be written.  If you set the full "
            "element_shape property on the forward TensorArray, the proper all-zeros tensor will be returned "
            "instead of incurring this error.")

    # the API ---------------------------------------------------------------------------------
    def write(self, i: int, value) -> Model:
        value = self.convert(value)
        es = self.python_check(value.shape)
        self.check_dtype(value)
        self.check_open()
        slots = list(self.slots)
        es = self.kernel_write(slots, es, i, value, self.size)
        return self._new(slots=tuple(slots), size=len(slots), es=es)

    def read(self, i: int) -> np.ndarray:
        self.check_open()
        return self.read_slot(i)

    def gather(self, indices) -> np.ndarray:
        if np.ndim(indices) != 1:
            raise invalid(f"Expected indices to be a vector, but received shape: {debug(np.shape(indices))}")
        if len(indices) == 0:  # reads nothing: no closed check either (live K; spec §2.9 says "every op")
            if not full(self.es):
                raise Expected(UnimplementedError, (
                    f"TensorArray has size zero, but element shape {debug(self.es)} is not fully defined. "
                    "Currently only static shapes are supported when packing zero-size TensorArrays."))
            return np.zeros((0, *self.es), self.dtype)
        self.check_open()  # ReadMany
        values = [self.read_slot(int(i)) for i in indices]
        for k, v in enumerate(values[1:], 1):
            if v.shape != values[0].shape:
                raise invalid(f"TensorArray has inconsistent shapes.  Index 0 has shape: {debug(values[0].shape)} "
                              f"but index {k} has shape: {debug(v.shape)}")
        return np.stack(values)

    def stack(self) -> np.ndarray:
        self.check_open()  # stack() gathers range(size()), and size() of a closed array fails
        return self.gather(list(range(self.size)))

    def scatter(self, indices, value) -> Model:
        value = self.convert(value)
        es = self.python_check(value.shape[1:])
        self.check_dtype(value)
        if value.ndim == 0:
            raise invalid("Input value for unpack must be at least a vector but received shape: []")
        self.check_open()
        if np.ndim(indices) != 1:
            raise invalid(f"Expected indices to be a vector, but received shape: {debug(np.shape(indices))}")
        if len(indices) != value.shape[0]:
            raise invalid(f"Expected len(indices) == values.shape[0], but saw: {len(indices)} vs. {value.shape[0]}")
        max_index = max(indices, default=-1)
        size = max(self.size, max_index + 1) if self.dynamic else self.size
        if max_index >= size:
            raise invalid(f"Max scatter index must be < array size ({max_index} vs. {size})")
        slots = list(self.slots) + [None] * (size - self.size)
        for k, i in enumerate(indices):
            es = self.kernel_write(slots, es, i, value[k], size)
        return self._new(slots=tuple(slots), size=size, es=es)

    def unstack(self, value) -> Model:
        return self.scatter(list(range(len(value))), value)

    def concat(self) -> np.ndarray:
        self.check_open()
        if self.size == 0:
            except0 = None if self.es is None else self.es[1:]  # TF passes element_shape[1:]
            if not full(except0):
                raise Expected(UnimplementedError, (
                    f"TensorArray has size zero, but element_shape_except0 {debug(except0)} is not fully defined. "
                    "Currently only static shapes are supported when concatenating zero-size TensorArrays."))
            return np.zeros((0, *except0), self.dtype)
        values = [self.read_slot(i) for i in range(self.size)]
        for i, v in enumerate(values):
            if v.ndim == 0:
                raise invalid(f"Concat saw a scalar shape at index {i} but requires at least vectors.  "
                              "Did you mean to call pack?")
            if v.shape[1:] != values[0].shape[1:]:
                raise invalid("TensorArray has inconsistent shapes.  Index 0 has (excepting dimension 0) shape: "
                              f"{debug(values[0].shape[1:])} but index {i} has (excepting dimension 0) shape: "
                              f"{debug(v.shape[1:])}")
        return np.concatenate(values)

    def split(self, value, lengths) -> Model:
        value = self.convert(value)
        es = self.es
        if np.ndim(lengths) == 1 and len(lengths) and min(lengths) == max(lengths):
            es = self.python_check((lengths[0], *value.shape[1:]))
        if np.ndim(lengths) != 1:
            raise invalid(f"Expected lengths to be a vector, received shape: {debug(np.shape(lengths))}")
        if value.ndim == 0:
            raise invalid("Expected value to be at least a vector, but received shape: []")
        for k, n in enumerate(lengths):  # HAZARD H2 (TF aborts): jta's own text
            if n < 0:
                raise invalid(f"TensorArray {NAME}: Split lengths must be non-negative, but lengths[{k}] is {n}. "
                              "(TensorFlow aborts the process here; jta refuses the input.)")
        if sum(lengths) != value.shape[0]:
            raise invalid(f"Expected sum of lengths to be equal to values.shape[0], but sum of lengths is "
                          f"{sum(lengths)} and value's shape is: {debug(value.shape)}")
        self.check_open()
        size = max(self.size, len(lengths)) if self.dynamic else self.size
        if size != len(lengths):
            raise invalid(f"TensorArray's size is not equal to the size of lengths ({size} vs. {len(lengths)}), "
                          "and the TensorArray is not marked as dynamically resizeable")
        self.check_dtype(value)
        slots = list(self.slots) + [None] * (size - self.size)
        offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(int)
        for t in range(size):
            es = self.kernel_write(slots, es, t, value[offsets[t]:offsets[t + 1]], size)
        return self._new(slots=tuple(slots), size=size, es=es)

    def size_(self) -> int:
        self.check_open()
        return self.size

    def close(self) -> Model:
        return self._new(closed=True)


# -- comparing jta with the model ----------------------------------------------------------

JAX_NOTE = re.compile(r"\n-+\nFor simplicity, JAX has removed .*", re.S)


def outcome(fn):
    try:
        return fn(), None
    except Expected as e:
        return None, e


def assert_value(actual, expected: np.ndarray) -> None:
    actual = np.asarray(actual)
    assert actual.dtype == expected.dtype, (actual.dtype, expected.dtype)
    assert actual.shape == expected.shape, (actual.shape, expected.shape)
    np.testing.assert_array_equal(actual, expected)


def assert_array(ta: jta.TensorArray, m: Model) -> None:
    """Static properties, size, and (where the model says it is defined) ``stack()``."""
    assert ta.dtype == m.dtype
    assert ta.dynamic_size == m.dynamic
    assert ta.element_shape == m.es, (ta.element_shape, m.es)
    if m.closed:
        return
    assert int(ta.size()) == m.size
    for i, slot in enumerate(m.slots):
        if slot is not None:
            assert_value(ta.read(i), slot)
    stacked, err = outcome(m.stack)
    if err is None:
        assert_value(ta.stack(), stacked)


def same(jta_fn, model_fn):
    """Run both; they must agree on the error (class and exact text) or return the results."""
    expected, err = outcome(model_fn)
    event(re.sub(r"-?\d+|\[[^]]*\]|\([^)]*\)", "#", "ok" if err is None else f"{err.cls.__name__}: {err.text}")[:90])
    if err is None:
        return jta_fn(), expected
    want = f"{err.cls.__name__}: {err.text}"
    try:
        result = jta_fn()
    except Exception as e:
        got = f"{type(e).__name__}: {JAX_NOTE.sub('', str(e))}"
        assert got == want, f"jta raised {got!r}, the model expects {want!r}"
        return None, None
    raise AssertionError(f"jta returned {result!r}, the model expects {want!r}")


# -- value generators -----------------------------------------------------------------------

def completion(shape, draw) -> tuple:
    if shape is None:
        return draw(st.sampled_from([(), (1,), (2,), (3,), (1, 3), (2, 3)]))
    return tuple(draw(st.sampled_from([0, 1, 2, 3])) if d is None else d for d in shape)


def wrong(shape, draw) -> tuple:
    """A shape incompatible with ``shape`` (or any shape when it is unknown)."""
    if shape is None:
        return completion(None, draw)
    if not shape:
        return (draw(st.sampled_from([1, 2])),)
    choices = [shape[:-1], (*shape, 1)] + [shape[:k] + ((d or 0) + 4,) + shape[k + 1:]
                                           for k, d in enumerate(shape) if d is not None]
    return completion(draw(st.sampled_from(choices)), draw)


def element(m: Model, draw) -> tuple:
    return wrong(m.es, draw) if rare(draw, "wrong shape", 8) else completion(m.es, draw)


def array(dtype, shape, draw) -> np.ndarray:
    flat = draw(st.lists(st.integers(-9, 9), min_size=int(np.prod(shape, dtype=int)),
                         max_size=int(np.prod(shape, dtype=int))))
    return np.asarray(flat, dtype).reshape(shape)


def value_of(m: Model, shape, draw):
    """A value of ``shape``: mostly a NumPy array of the array's dtype, sometimes a Python scalar,
    or a NumPy or JAX array of the other dtype."""
    kind = draw(st.sampled_from(["ok"] * 6 + ["python", "other", "other-jax"]), label="value kind")
    if kind == "python" and shape == ():
        return draw(st.sampled_from([3, -2, 1.5]))
    if kind.startswith("other"):
        value = array(next(d for d in DTYPES if d != m.dtype), shape, draw)
        return jnp.asarray(value) if kind == "other-jax" else value
    return array(m.dtype, shape, draw)


def rare(draw, label: str, n: int = 10) -> bool:
    """True about once in ``n`` draws (hypothesis favours a sampled list's first elements)."""
    return draw(st.sampled_from([False] * (n - 1) + [True]), label=label)


def index(m: Model, draw) -> int:
    """Mostly in range; else -1, ``size`` or (dynamic arrays) past the end."""
    if m.size and not rare(draw, "index out of range", 4):
        return draw(st.integers(0, m.size - 1), label="index")
    return draw(st.sampled_from([m.size, -1, m.size + 2 * m.dynamic]), label="index")


# -- the state machine ---------------------------------------------------------------------

@contextlib.contextmanager
def raises_at_run_time(cls, text):
    """An exception raised inside compiled code: JAX's error carries jta's class and text."""
    quiet = logging.getLogger("jax._src.debugging")  # it logs the callback's exception as well
    level, quiet.level = quiet.level, logging.CRITICAL
    try:
        with pytest.raises(Exception, match=f"(?m)^{cls.__name__}: {re.escape(text)}$"):
            yield
    finally:
        quiet.setLevel(level)


@jax.jit
def _jit_write(ta, i, v):
    return ta.write(i, v)


@jax.jit
def _jit_read(ta, i):
    return ta.read(i)


class TensorArrayMachine(RuleBasedStateMachine):
    def __init__(self):
        super().__init__()
        self.versions: list[tuple[jta.TensorArray, Model]] = []

    def keep(self, ta: jta.TensorArray, m: Model, latest: bool = True) -> None:
        """Keep a version (``latest=False``: among the old ones, which are picked less often)."""
        assert_array(ta, m)
        self.versions.insert(len(self.versions) if latest else min(1, len(self.versions)), (ta, m))
        if len(self.versions) > MAX_VERSIONS:
            del self.versions[1]  # keep the very first version: the oldest one is checked longest

    def pick(self, data) -> tuple[jta.TensorArray, Model]:
        """Any version, the latest ones more often."""
        return data.draw(st.sampled_from(self.versions[::-1]), label="version")

    @initialize(dtype=st.sampled_from(DTYPES), size=st.sampled_from(SIZES), es=st.sampled_from(ELEMENT_SHAPES),
                dynamic=st.booleans(), infer=st.booleans(), clear=st.booleans())
    def create(self, dtype, size, es, dynamic, infer, clear):
        ta = jta.TensorArray(dtype, size=size, dynamic_size=dynamic, clear_after_read=clear,
                             tensor_array_name=NAME, infer_shape=infer, element_shape=es)
        self.keep(ta, Model(dtype, size, dynamic, infer, es, (None,) * size))

    @rule(dtype=st.sampled_from(DTYPES), size=st.sampled_from(SIZES), es=st.sampled_from(ELEMENT_SHAPES),
          dynamic=st.booleans(), infer=st.booleans(), clear=st.booleans())
    def create_another(self, dtype, size, es, dynamic, infer, clear):
        self.create(dtype, size, es, dynamic, infer, clear)

    @rule(size=st.integers(-3, -1))
    def create_negative_size(self, size):
        with pytest.raises(InvalidArgumentError, match=r"^Size should be >= 0\.$"):
            jta.TensorArray(np.float32, size=size, tensor_array_name=NAME)

    @rule(data=st.data())
    def write(self, data):
        ta, m = self.pick(data)
        i = index(m, data.draw)
        v = value_of(m, element(m, data.draw), data.draw)
        new, m2 = same(lambda: ta.write(i, v), lambda: m.write(i, v))
        if new is not None:
            self.keep(new, m2)

    @rule(data=st.data())
    def write_every_empty_slot(self, data):
        """Fill a version, then stack and concat it (ragged without ``infer_shape``)."""
        ta, m = self.pick(data)
        for i in range(m.size):
            if m.slots[i] is None:
                v = value_of(m, completion(m.es, data.draw), data.draw)
                ta2, m2 = same(lambda ta=ta, m=m, i=i, v=v: ta.write(i, v), lambda m=m, i=i, v=v: m.write(i, v))
                if ta2 is not None:
                    ta, m = ta2, m2
        self.keep(ta, m)
        for op in ("stack", "concat"):
            got, expected = same(getattr(ta, op), getattr(m, op))
            if got is not None:
                assert_value(got, expected)

    @rule(data=st.data())
    def read(self, data):
        ta, m = self.pick(data)
        i = index(m, data.draw)
        got, expected = same(lambda: ta.read(i), lambda: m.read(i))
        if got is not None:
            assert_value(got, expected)
            assert_value(ta.read(i), expected)  # reading does not clear (README)

    @rule(data=st.data())
    def stack(self, data):
        ta, m = self.pick(data)
        got, expected = same(ta.stack, m.stack)
        if got is not None:
            assert_value(got, expected)

    @rule(data=st.data())
    def gather(self, data):
        ta, m = self.pick(data)
        if rare(data.draw, "scalar indices"):
            indices: Any = np.int32(index(m, data.draw))
        else:
            indices = [index(m, data.draw) for _ in range(data.draw(st.integers(0, 4), label="count"))]
        got, expected = same(lambda: ta.gather(np.asarray(indices, np.int32)), lambda: m.gather(indices))
        if got is not None:
            assert_value(got, expected)

    @rule(data=st.data())
    def scatter(self, data):
        ta, m = self.pick(data)
        indices = [index(m, data.draw) for _ in range(data.draw(st.integers(0, 4), label="count"))]
        rows = len(indices) + rare(data.draw, "bad count")
        scalar = rare(data.draw, "scalar value", 15)
        v = value_of(m, () if scalar else (rows, *element(m, data.draw)), data.draw)
        new, m2 = same(lambda: ta.scatter(np.asarray(indices, np.int32), v), lambda: m.scatter(indices, v))
        if new is not None:
            self.keep(new, m2)

    @rule(data=st.data())
    def unstack(self, data):
        ta, m = self.pick(data)
        rows = data.draw(st.integers(0, m.size + 1), label="rows")
        v = value_of(m, (rows, *element(m, data.draw)), data.draw)
        new, m2 = same(lambda: ta.unstack(v), lambda: m.unstack(v))
        if new is not None:
            self.keep(new, m2)

    @rule(data=st.data())
    def concat(self, data):
        ta, m = self.pick(data)
        got, expected = same(ta.concat, m.concat)
        if got is not None:
            assert_value(got, expected)

    @rule(data=st.data())
    def split(self, data):
        ta, m = self.pick(data)
        n = max(1, m.size + data.draw(st.sampled_from([0, 0, 0, 1, -1]), label="pieces"))
        choices = [1, 2, 0, 3] + [-1] * rare(data.draw, "negative lengths")
        lengths: Any = data.draw(st.lists(st.sampled_from(choices), min_size=n, max_size=n), label="lengths")
        if data.draw(st.booleans(), label="equal lengths"):
            lengths = [lengths[0]] * n
        rows = sum(lengths) + rare(data.draw, "bad sum")
        rest = element(m, data.draw)[1:] if m.es is None or len(m.es) else ()
        v = array(m.dtype, (max(rows, 0), *rest), data.draw)
        if rare(data.draw, "scalar lengths", 15):
            lengths = rows
        elif rare(data.draw, "scalar value", 15):
            v = array(m.dtype, (), data.draw)
        new, m2 = same(lambda: ta.split(v, np.asarray(lengths, np.int32)), lambda: m.split(v, lengths))
        if new is not None:
            self.keep(new, m2)

    @rule(data=st.data())
    def size(self, data):
        ta, m = self.pick(data)
        got, expected = same(ta.size, m.size_)
        if got is not None:
            assert_value(got, np.int32(expected))

    @rule(data=st.data())
    def close(self, data):
        ta, m = self.pick(data)
        self.keep(ta.close(), m.close(), latest=False)

    @rule(data=st.data())
    def identity(self, data):
        ta, m = self.pick(data)
        self.keep(ta.identity(), m)

    @precondition(lambda self: any(full(m.es) and not m.dynamic and not m.closed for _, m in self.versions))
    @rule(data=st.data())
    def jit_write_and_read_at_traced_index(self, data):
        """Errors at traced indices are recorded (write: raised by ``jta.throw``) or raised at run time (read)."""
        ta, m = data.draw(st.sampled_from([(t, m) for t, m in self.versions
                                           if full(m.es) and not m.dynamic and not m.closed]), label="dense version")
        i = index(m, data.draw)
        v = array(m.dtype, m.es, data.draw)
        new = _jit_write(ta, np.int32(i), v)
        m2, err = outcome(lambda: m.write(i, v))
        if err is None:
            self.keep(jta.throw(new), m2)
        else:
            with pytest.raises(err.cls) as info:
                jta.throw(new)
            assert str(info.value) == err.text
        expected, err = outcome(lambda: m.read(i))
        if err is None:
            assert_value(_jit_read(ta, np.int32(i)), expected)
        else:
            with raises_at_run_time(err.cls, err.text):
                jax.block_until_ready(_jit_read(ta, np.int32(i)))

    @invariant()
    def old_versions_never_see_later_writes(self):
        for ta, m in self.versions:
            assert_array(ta, m)


# 15 runs of 20 steps by default, 200 runs of 30 steps under --long (tests/conftest.py);
# derandomized, so every machine runs the same examples.
TensorArrayMachine.TestCase.settings = settings(
    max_examples=scaled(15, 200), stateful_step_count=scaled(20, 30), deadline=None, derandomize=True,
    database=None, suppress_health_check=list(HealthCheck))
test_tensor_array_machine = TensorArrayMachine.TestCase
test_tensor_array_machine.pytestmark = [pytest.mark.long]


# -- regressions: the jta bugs this machine found (orders and texts checked against live mode K) ----

def _ta(size=3, **kw):
    return jta.TensorArray(np.float32, size, tensor_array_name=NAME, **kw)


REGRESSIONS = {
    # TF's Python layer checks the static shape before the kernel checks the dtype (or closedness).
    "write-shape-before-dtype": (lambda: _ta(element_shape=(2,)).write(0, jnp.int32([1, 2, 3])), ValueError,
                                 "Inconsistent shapes: saw (3,) but expected (2,) "),
    "scatter-shape-before-dtype": (lambda: _ta(element_shape=(2,)).scatter([0], jnp.int32([[1, 2, 3]])),
                                   ValueError, "Inconsistent shapes: saw (3,) but expected (2,) "),
    "unstack-shape-before-dtype": (lambda: _ta(element_shape=(2,)).unstack(jnp.int32([[1, 2, 3]])), ValueError,
                                   "Inconsistent shapes: saw (3,) but expected (2,) "),
    "scatter-scalar-value-shape": (lambda: _ta(element_shape=(2,)).scatter([0], np.float32(1)), ValueError,
                                   "Inconsistent shapes: saw () but expected (2,) "),
    "split-scalar-value-shape": (lambda: _ta(1, element_shape=(3,)).split(np.float32(1), [1]), ValueError,
                                 "Inconsistent shapes: saw (1,) but expected (3,) "),
    # A closed array: the kernels validate their arguments first.
    "closed-gather-scalar-indices": (lambda: _ta(element_shape=(2,)).close().gather(np.int32(1)), InvalidArgumentError,
                                     "Expected indices to be a vector, but received shape: []"),
    "closed-split-lengths-sum": (lambda: _ta().close().split(np.float32([1, 2]), [1]), InvalidArgumentError,
                                 "Expected sum of lengths to be equal to values.shape[0], but sum of lengths is 1 "
                                 "and value's shape is: [2]"),
    "closed-scatter-scalar-value": (lambda: _ta().close().scatter([0], np.float32(1)), InvalidArgumentError,
                                    "Input value for unpack must be at least a vector but received shape: []"),
    "closed-scatter-dtype": (lambda: _ta().close().scatter([0], jnp.int32([1])), InvalidArgumentError,
                             "TensorArray dtype is float but Op is trying to write dtype int32."),
    # concat() passes element_shape[1:] as element_shape_except0.
    "concat-size0-partial": (lambda: _ta(0, element_shape=(2, None)).concat(), UnimplementedError,
                             "TensorArray has size zero, but element_shape_except0 [?] is not fully defined. "
                             "Currently only static shapes are supported when concatenating zero-size TensorArrays."),
    # Concat checks each element in order: rank, then its trailing shape against element 0's.
    "concat-ragged-order": (lambda: _ta(infer_shape=False).write(0, np.float32([1])).write(1, np.float32([[1]]))
                            .write(2, np.float32(2)).concat(), InvalidArgumentError,
                            "TensorArray has inconsistent shapes.  Index 0 has (excepting dimension 0) shape: [] "
                            "but index 1 has (excepting dimension 0) shape: [1]"),
    # A scatter writes in index order and stops at the first failing write.
    "scatter-duplicate-before-negative": (lambda: _ta(element_shape=()).scatter([0, 0, -1], np.float32([1, 2, 3])),
                                          InvalidArgumentError, f"TensorArray {NAME}: Could not write to TensorArray "
                                          "index 0 because it has already been written to."),
    "scatter-written-in-order": (lambda: _ta(element_shape=()).write(0, 1.0).write(2, 1.0)
                                 .scatter([2, 0], np.float32([1, 2])), InvalidArgumentError,
                                 f"TensorArray {NAME}: Could not write to TensorArray index 2 because it has already "
                                 "been written to."),
    "scatter-written-before-negative": (lambda: _ta(element_shape=()).write(1, 1.0).scatter([1, -1], np.float32([1, 2])),
                                        InvalidArgumentError, f"TensorArray {NAME}: Could not write to TensorArray "
                                        "index 1 because it has already been written to."),
}


@pytest.mark.parametrize("case", list(REGRESSIONS))
def test_regression(case):
    build, cls, text = REGRESSIONS[case]
    with pytest.raises(cls) as info:
        build()
    assert type(info.value) is cls and str(info.value) == text


@pytest.mark.parametrize(("es", "shape"), [((None,), (0,)), ((), (0,)), ((3, 0), (6, 0))])
def test_regression_concat_shapes(es, shape):
    """Size 0 with a known ``element_shape[1:]`` gives zeros (live K); a zero trailing dim reshapes."""
    ta = _ta(0 if shape[0] == 0 else 2, element_shape=es)
    assert_value(ta.concat(), np.zeros(shape, np.float32))


def test_regression_traced_read_of_an_empty_array():
    """A traced index into a size-0 array records the range error (it was a JAX gather error)."""
    with raises_at_run_time(InvalidArgumentError, "Tried to read from index 0 but array size is: 0"):
        jax.block_until_ready(_jit_read(_ta(0, element_shape=(2,)), np.int32(0)))
