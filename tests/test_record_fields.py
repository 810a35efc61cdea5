"""A record's integer fields print the value the user gave, whatever its integer dtype.

An error found in compiled code is recorded as integers (``[code, v1, v2, v3]``, int64 under x64)
and formatted later; eager code formats the value itself. A field holding a ``uint64`` index past
2**63 read as a negative int64 (``index -2`` for ``2**64 - 2``) until the record's code word said
which fields hold unsigned values (``jta._records.catalogue.code_word``); gather and scatter at
such NumPy/JAX indices printed the wrapped int64 eagerly too, and traced uint64 split lengths
were summed in float64 (compiled code reported a sum of lengths where eager code reports TF's
negative length); without x64, uint32 lengths were summed in int32 (a wrapped sum).

:func:`test_every_field_kind_is_enumerated` classifies every catalogue error that carries traced
integers: each one that can hold a user's integer is reached by a program of :data:`KINDS`.
:func:`test_extremes_print_the_same_text` runs each program at the extremes of each integer dtype
(int8..uint64, x64 on) eagerly, through ``jta.checked(jax.jit(f))``, inside a ``lax.scan``
(``jta.checked``) and under a bare ``jax.jit`` (``jta.throw()``), and requires the text
TensorFlow's template gives for the value as given (an index) or as TensorFlow's
``TensorArray.split`` casts it to int64 (a length). By default it runs the kinds whose records
are made by different code at uint64 (one compiled mode each, rotating); ``--long`` runs every
kind at every dtype in every mode.
:func:`test_without_x64_uint32_prints_the_same_text` does the same for uint32 without x64 (int32
records), a split by default, every kind under ``--long``.

TensorFlow's reference: its TensorArray indices are int32 and its split lengths int64 only, so
the texts for those are TensorFlow's, as probed on TF 2.21 (:data:`TF_TEXTS`, checked against the
live kernels under ``--long``); for every other dtype the reference is jta's eager text, which
must be the template filled with the value.

:func:`test_slot_at_int32_max_compiles_and_runs` (``--long`` only: two subprocesses, about 40 s)
compiles ``jta_slot`` at the constant slot 2**31 - 1 and TensorArray ops at that index in a
process of its own, with the suite's XLA flags and with XLA's defaults.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax

import jta
from jta._records import catalogue, primitives
from jta._records.catalogue import Error
from tests.helpers import budget

F32 = jnp.float32
DTYPES = ("uint8", "uint16", "uint32", "uint64", "int8", "int16", "int32", "int64")
NAME = "TensorArray"


def _array(**kw):
    kw.setdefault("size", 3)
    kw.setdefault("element_shape", ())
    return jta.TensorArray(F32, **kw)


def _pair(i):
    """``[i, 4 - i]`` in ``i``'s dtype (wrapping as it does)."""
    return jnp.stack([i, (jnp.asarray(4, i.dtype) - i)])


def _as_int64(v: int) -> int:
    """TensorFlow's cast of a length to int64 (``TensorArray.split``): a uint64 wraps."""
    return int(np.array(v, np.uint64 if v >= 2**63 else np.int64).astype(np.int64))


def _index_error(v, size=3):
    if 0 <= v < size:
        return None
    return Error.READ_OUT_OF_RANGE.exception(name=NAME, index=v, size=size)


def _write_error(v, size=3):
    return None if 0 <= v < size else Error.WRITE_OUT_OF_RANGE.exception(name=NAME, index=v, size=size)


def _scatter_error(v, size=3):
    if v < 0:
        return Error.WRITE_OUT_OF_RANGE.exception(name=NAME, index=v, size=size)
    return None if v < size else Error.SCATTER_OUT_OF_RANGE.exception(name=NAME, index=v, size=size)


def _capacity_error(v):  # a dynamic_size array of size 0 and capacity 4
    if v < 0:
        return Error.WRITE_OUT_OF_RANGE.exception(name=NAME, index=v, size=0)
    return None if v < 4 else Error.WRITE_BEYOND_CAPACITY.exception(name=NAME, index=v, capacity=4)


def _split_error(v):  # lengths [v] of 4 rows
    n = _as_int64(v)
    if n < 0:
        return Error.NEGATIVE_SPLIT_LENGTH.exception(name=NAME, position=0, length=n)
    return None if n == 4 else Error.SPLIT_SUM.exception(name=NAME, total=n, rows=4, rest="")


def _equal_pieces_error(v):  # lengths [v, v] of 4 rows into elements of shape (2,): TF's Python check first
    n = _as_int64(v)
    return None if n == 2 else Error.SPLIT_PIECES_INCONSISTENT.exception(name=NAME, length=n, expected=2, python_rest=",")


def _pair_error(v, dtype):  # lengths [v, 4 - v] of 4 rows: negative, else a sum that differs
    with np.errstate(over="ignore"):
        second = int(np.array(4, dtype) - np.array(v, dtype))  # wraps, as in the program
    lengths = [_as_int64(v), _as_int64(second)]
    for k, n in enumerate(lengths):
        if n < 0:
            return Error.NEGATIVE_SPLIT_LENGTH.exception(name=NAME, position=k, length=n)
    total = sum(lengths)
    if total != 4 or any(n > 4 for n in lengths):
        return Error.SPLIT_SUM.exception(name=NAME, total=total, rows=4, rest="")
    return "ok"  # in range: checked by mode agreement only


# kind -> (program of a traced scalar ``i``, the error eager code must raise for the value ``v``
# of dtype ``dt`` (``None``: none; ``"ok"``: not computed here), the catalogue errors it reaches).
KINDS = {
    "write": (lambda i: _array().write(i, 1.0).stack(), lambda v, dt: _write_error(v),
              {Error.WRITE_OUT_OF_RANGE}),
    "read": (lambda i: _array().unstack(jnp.zeros(3, F32)).read(i), lambda v, dt: _index_error(v),
             {Error.READ_OUT_OF_RANGE}),
    "gather": (lambda i: _array().unstack(jnp.zeros(3, F32)).gather(i[None]), lambda v, dt: _index_error(v),
               {Error.READ_OUT_OF_RANGE}),
    "scatter": (lambda i: _array().scatter(i[None], jnp.ones(1, F32)).stack(), lambda v, dt: _scatter_error(v),
                {Error.WRITE_OUT_OF_RANGE, Error.SCATTER_OUT_OF_RANGE}),
    "write_capacity": (lambda i: _array(size=0, dynamic_size=True, capacity=4).write(i, 1.0).stack_padded(),
                       lambda v, dt: _capacity_error(v), {Error.WRITE_OUT_OF_RANGE, Error.WRITE_BEYOND_CAPACITY}),
    "scatter_capacity": (lambda i: _array(size=0, dynamic_size=True, capacity=4).scatter(i[None], jnp.ones(1, F32))
                         .stack_padded(), lambda v, dt: _capacity_error(v),
                         {Error.WRITE_OUT_OF_RANGE, Error.WRITE_BEYOND_CAPACITY}),
    # Eager code grows a gradient array as TensorFlow does (to the size read: too large to
    # allocate here); compiled code keeps the forward array's capacity. So this kind's reference
    # is the template, for the compiled modes only (see ``EAGER_DIFFERS``).
    "read_gradient": (lambda i: _array(size=2, dynamic_size=True, capacity=4).grad("gradients", {})[1].read(i),
                      lambda v, dt: (None if 0 <= v < 4 else
                                     Error.READ_OUT_OF_RANGE.exception(name=f"{NAME}@gradients", index=v, size=2)
                                     if v < 0 else Error.READ_BEYOND_CAPACITY.exception(name=f"{NAME}@gradients",
                                                                                         index=v, capacity=4)),
                      {Error.READ_OUT_OF_RANGE, Error.READ_BEYOND_CAPACITY}),
    "split": (lambda i: _array(size=1, element_shape=None, infer_shape=False).split(jnp.zeros(4, F32), i[None]).concat(),
              lambda v, dt: _split_error(v), {Error.NEGATIVE_SPLIT_LENGTH, Error.SPLIT_SUM}),
    "split_ragged": (lambda i: _array(size=2, element_shape=None, infer_shape=False).split(jnp.zeros(4, F32), _pair(i))
                     .concat(), _pair_error, {Error.TRACED_RAGGED_SPLIT}),
    "split_pieces": (lambda i: _array(size=2, element_shape=(2,)).split(jnp.zeros(4, F32), _pair(i)).concat(),
                     _pair_error, {Error.SPLIT_PIECE_SHAPE}),
    "split_equal": (lambda i: _array(size=2, element_shape=(2,)).split(jnp.zeros(4, F32), jnp.stack([i, i])).concat(),
                    lambda v, dt: _equal_pieces_error(v), {Error.SPLIT_PIECES_INCONSISTENT}),
}

EAGER_DIFFERS = {"read_gradient"}

# Catalogue errors with traced fields that hold no integer of the user's beyond what the kinds reach.
NOT_USER_VALUES = {
    Error.WRITE_AFTER_READ: "a slot's index: in range (below the array's int32 size), or the range error comes first",
    Error.WRITTEN_TWICE: "a slot's index, as above",
    Error.READ_CLEARED: "a slot's index, as above",
    Error.SPLIT_SIZE: "the array's traced size (jta's int32) and the number of lengths (static)",
    Error.LOOP_STACK_FULL: "jta's loop number and counts",
    Error.LOOP_STACK_UNPLANNED: "jta's counts (the steps run and the stacks' rows)",
    Error.ARRAY_SIZE_LEARNED: "jta's sizes and plan number",
    Error.RESULT_SIZE_LEARNED: "jta's sizes and plan number",
    Error.LOOP_STEPS_LEARNED: "jta's trip counts (at most 129 in magnitude) and plan number",
}
# Reached by a kind, but their user fields never hold an extreme: a length past the rows fails
# SPLIT_SUM (or NEGATIVE_SPLIT_LENGTH) first, so these hold lengths in [0, rows].
BOUNDED = {Error.TRACED_RAGGED_SPLIT, Error.SPLIT_PIECE_SHAPE}


def test_every_field_kind_is_enumerated():
    traced = {m for m in Error if m.fields}
    reached = set().union(*(errors for _, _, errors in KINDS.values()))
    assert traced == reached | set(NOT_USER_VALUES), sorted(m.name for m in traced ^ (reached | set(NOT_USER_VALUES)))
    assert not reached & set(NOT_USER_VALUES)
    assert BOUNDED <= reached


def _extremes(dtype: str) -> list[int]:
    info = np.iinfo(dtype)
    values = [int(info.max), int(info.max) - 1]
    if info.min < 0:
        values += [int(info.min), int(info.min) + 1]
    return values


def _scan(f):
    return lambda x: lax.scan(lambda c, i: (c, f(i)), 0, x[None])[1]


def _bare(f):
    jitted = jax.jit(f)

    def run(x):
        try:
            return jitted(x)
        except jax.errors.JaxRuntimeError:
            jta.throw()
            raise
    return run


MODES = {"checked": lambda f: jta.checked(jax.jit(f)), "scan": lambda f: jta.checked(jax.jit(_scan(f))), "bare": _bare}


def _outcome(fn, x) -> str:
    try:
        jax.block_until_ready(fn(x))
    except Exception as e:  # noqa: BLE001 - the outcome is compared as text
        return f"{type(e).__name__}: {e.args[0] if e.args else e}"
    return "no error"


def _text(exc) -> str:
    return "no error" if exc is None else f"{type(exc).__name__}: {exc}"


# By default (the time budget): the kinds whose records are made by different code (every kind
# under ``--long``).
SHARED_PATHS = {"scatter_capacity": "scatter's and write_capacity's", "split_ragged": "split_pieces'"}


def _cases():
    for kind in KINDS:
        for dtype in DTYPES:
            if not budget.long_run() and (dtype != "uint64" or kind in SHARED_PATHS):
                continue
            for mode in MODES:
                yield pytest.param(kind, dtype, mode, id=f"{kind}-{dtype}-{mode}")


@pytest.mark.long
@pytest.mark.rotate("mode")
@pytest.mark.parametrize("kind, dtype, mode", list(_cases()))
def test_extremes_print_the_same_text(kind, dtype, mode):
    program, expected, _ = KINDS[kind]
    with jax.enable_x64(True):
        compiled = MODES[mode](program)
        for v in _extremes(dtype):
            x = jnp.asarray(np.array(v, dtype))
            want = expected(v, np.dtype(dtype))
            if kind in EAGER_DIFFERS:
                reference = _text(want)
            else:
                reference = _outcome(program, x)
                if not isinstance(want, str):
                    assert reference == _text(want), f"eager, {dtype} {v}"
            assert _outcome(compiled, x) == reference, f"{mode}, {dtype} {v}"


@pytest.mark.long
@pytest.mark.rotate("mode")
@pytest.mark.parametrize("kind, mode", [(k, m) for k in (KINDS if budget.long_run() else ("split",))
                                        for m in MODES if k not in EAGER_DIFFERS])
def test_without_x64_uint32_prints_the_same_text(kind, mode):
    """Without x64 a record is int32: a uint32 index past 2**31 keeps its top bit in its
    ``<f>_high`` field, and a sum of lengths past 2**31 (TensorFlow's is int64) is summed exactly
    (it wrapped around in 32 bits: ``sum of lengths is 4`` for ``[2**32 - 1, 5]``)."""
    program, expected, _ = KINDS[kind]
    with jax.enable_x64(False):
        compiled = MODES[mode](program)
        for v in _extremes("uint32"):
            x = jnp.asarray(np.array(v, np.uint32))
            reference = _outcome(program, x)
            want = expected(v, np.dtype(np.uint32))
            if not isinstance(want, str):
                assert reference == _text(want), f"eager, {v}"
            assert _outcome(compiled, x) == reference, f"{mode}, {v}"


def test_loop_decided_while_tracing_at_uint64():
    """A scan whose uint64 counter (from 2**64 - 3) is known while tracing: the first error is
    decided then (``hoisting.decide_known``), from records computed in NumPy."""
    def f():
        def step(carry, _):
            ta, i = carry
            return (ta.write(i, 1.0), i + np.uint64(1)), None
        return lax.scan(step, (_array(), jnp.uint64(2**64 - 3)), None, length=2)[0][0].stack()

    want = str(Error.WRITE_OUT_OF_RANGE.exception(name=NAME, index=2**64 - 3, size=3))
    with jax.enable_x64(True):
        for run in (f, jta.checked(jax.jit(f))):
            with pytest.raises(jta.errors.InvalidArgumentError) as info:
                run()
            assert str(info.value) == want


# -- the code word --------------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", ["uint64", "int64", "uint32", "int32"])
def test_record_fields_round_trip_at_extremes(dtype):
    """``packed`` (a record's entry) and ``Message.by_code`` (its text): every value of the field
    comes back as given; a signed or narrower field leaves the code as it is."""
    info = np.iinfo(dtype)
    values = [0, 1, int(info.max), int(info.max) - 1, int(info.min), int(info.min) + 1, int(info.max) // 2 + 1]
    with jax.enable_x64(True):
        for v in values:
            given = np.array(v, dtype)
            for field in (given, jnp.asarray(given)):
                record = np.asarray(primitives.packed(np.int64, 4, Error.WRITE_OUT_OF_RANGE.code, field, 3, 0))
                if dtype != "uint64" or v < 2**63:
                    assert int(record[0]) == Error.WRITE_OUT_OF_RANGE.code
                exc = Error.by_code(int(record[0])).from_record(NAME, record[1:], {})
                assert str(exc) == str(Error.WRITE_OUT_OF_RANGE.exception(name=NAME, index=v, size=3))


def test_code_word_marks_each_field():
    big = np.uint64(2**64 - 2)
    with jax.enable_x64(True):
        record = np.asarray(primitives.packed(np.int64, 4, Error.SPLIT_PIECES_INCONSISTENT.code, big, 2, big))
    assert int(record[0]) == catalogue.code_word(Error.SPLIT_PIECES_INCONSISTENT.code, 0b101)
    member = Error.by_code(int(record[0]))
    assert member.code == Error.SPLIT_PIECES_INCONSISTENT.code and member.cls is ValueError
    # A field read as unsigned is whole: its ``_high`` word is not added again.
    assert str(member.from_record(NAME, record[1:], {"rest": ""})) == (
        f"Inconsistent shapes: saw ({2**64 - 2},) but expected (2,) ")


def test_vmapped_records_keep_their_code_words():
    """The first failing member of a batch, at a uint64 index past 2**63."""
    with jax.enable_x64(True):
        f = jta.checked(jax.jit(jax.vmap(lambda i: _array().write(i, 1.0).stack())))
        with pytest.raises(jta.errors.InvalidArgumentError, match=f"index {2**64 - 3} but"):
            f(jnp.asarray(np.array([1, 2**64 - 3, 2**64 - 5], np.uint64)))


# -- TensorFlow's texts (int32 indices, int64 lengths) ------------------------------------------------

# Probed on TF 2.21 (tf.TensorArray in a graph, the kernels' texts, runtime names without their
# counter): ``(kind, dtype, value) -> text``.
TF_TEXTS = {
    ("write", "int32", 2**31 - 1): "TensorArray TensorArray: Tried to write to index 2147483647 but array is not "
                                   "resizeable and size is: 3",
    ("write", "int32", -2**31): "TensorArray TensorArray: Tried to write to index -2147483648 but array is not "
                                "resizeable and size is: 3",
    ("read", "int32", 2**31 - 1): "Tried to read from index 2147483647 but array size is: 3",
    ("read", "int32", -2**31): "Tried to read from index -2147483648 but array size is: 3",
    ("gather", "int32", 2**31 - 1): "Tried to read from index 2147483647 but array size is: 3",
    ("gather", "int32", -2**31): "Tried to read from index -2147483648 but array size is: 3",
    ("scatter", "int32", 2**31 - 1): "Max scatter index must be < array size (2147483647 vs. 3)",
    ("scatter", "int32", -2**31): "TensorArray TensorArray: Tried to write to index -2147483648 but array is not "
                                  "resizeable and size is: 3",
    ("split", "int64", 2**63 - 1): "Expected sum of lengths to be equal to values.shape[0], but sum of lengths is "
                                   "9223372036854775807 and value's shape is: [4]",
    ("split_equal", "int64", 2**63 - 1): "Inconsistent shapes: saw (9223372036854775807,) but expected (2,) ",
}


@pytest.mark.parametrize("case", list(TF_TEXTS), ids=lambda c: "-".join(map(str, c)))
def test_tensorflow_texts(case):
    """jta's eager text is TensorFlow's where TensorFlow takes the dtype (the compiled modes are
    jta's eager text: ``test_extremes_print_the_same_text``)."""
    kind, dtype, v = case
    with jax.enable_x64(True):
        got = _outcome(KINDS[kind][0], jnp.asarray(np.array(v, dtype)))
    assert got.split(": ", 1)[1] == TF_TEXTS[case]


def _tf_program(tf, kind, x):
    ta = tf.TensorArray(tf.float32, size=3, element_shape=())
    zeros = tf.zeros([3])
    if kind == "write":
        return ta.write(x, 1.0).stack()
    if kind == "read":
        return ta.unstack(zeros).read(x)
    if kind == "gather":
        return ta.unstack(zeros).gather(tf.reshape(x, [1]))
    if kind == "scatter":
        return ta.scatter(tf.reshape(x, [1]), tf.ones([1])).stack()
    if kind == "split":
        return tf.TensorArray(tf.float32, size=1, infer_shape=False).split(tf.zeros([4]), tf.reshape(x, [1])).concat()
    assert kind == "split_equal", kind
    return tf.TensorArray(tf.float32, size=2, element_shape=(2,)).split(tf.zeros([4]), tf.stack([x, x])).concat()


@pytest.mark.long_only
def test_tensorflow_texts_live():
    """:data:`TF_TEXTS` against live TensorFlow: graph mode, where the kernels say it."""
    tf = pytest.importorskip("tensorflow")
    from tests.helpers.tfgraph import k_graph
    from tests.oracle._tf_cases import normalise
    for (kind, dtype, v), text in TF_TEXTS.items():
        with k_graph() as graph:
            # A constant for TF's Python check of equal split lengths, else a placeholder (the kernel's check).
            x = (tf.constant(v, dtype) if kind == "split_equal"
                 else tf.compat.v1.placeholder_with_default(np.array(v, dtype), shape=()))
            try:
                out = _tf_program(tf, kind, x)
                with tf.compat.v1.Session(graph=graph) as sess:
                    sess.run(out)
            except (tf.errors.OpError, ValueError) as e:
                got = normalise(getattr(e, "message", None) or str(e))
            else:
                got = "no error"
        assert got == text, (kind, dtype, v)


# -- a slot at 2**31 - 1: compiled in a process of its own (a crash would kill pytest) ---------------

_SLOT_PROGRAMS = r'''
import jax, jax.numpy as jnp, numpy as np
from jax import lax
import jta
from jta._records import primitives, slots

F32 = jnp.float32


def _thrown():
    try:
        jta.throw()
    except jta.errors.InvalidArgumentError as e:
        return e
    raise AssertionError("jta.throw() raised nothing")


for x64 in (True, False):
    jax.config.update("jax_enable_x64", x64)
    for s in (2**31 - 1, 2**31 - 2):
        for op in slots.OPS:
            for flags in (jnp.zeros(4, jnp.int32), jnp.arange(300, dtype=jnp.int32) & 31):
                # A constant slot, constant flags (folded by XLA), flags as an argument, and in a loop.
                out = jax.jit(lambda: slots.update(flags, primitives.no_error(), s, op))()
                assert np.array_equal(out[0], flags) and not np.asarray(out[1]).any(), (s, op)
                jax.jit(lambda f, r: slots.update(f, r, s, op))(flags, primitives.no_error())
                jax.jit(lambda f: lax.scan(lambda c, _: (slots.update(c[0], c[1], s, op), None),
                                           (f, primitives.no_error()), None, length=2)[0])(flags)
        for dt in ((jnp.int32, jnp.int64) if x64 else (jnp.int32,)):
            i = jnp.asarray(s, dt)
            programs = {
                "write": lambda i: jta.TensorArray(F32, size=3, element_shape=()).write(i, 1.0).stack(),
                "read": lambda i: jta.TensorArray(F32, size=3, element_shape=()).read(i),
                "gather": lambda i: jta.TensorArray(F32, size=3, element_shape=()).gather(i[None]),
                "scatter": lambda i: jta.TensorArray(F32, size=3, element_shape=()).scatter(i[None], jnp.ones(1, F32)).stack(),
                "scan": lambda i: lax.scan(lambda ta, x: (ta.write(x, 1.0), None),
                                           jta.TensorArray(F32, size=3, element_shape=()), jnp.stack([i, i]))[0].stack(),
            }
            for name, f in programs.items():
                # traced and constant indices through jta.checked, and a bare jit (a host callback raises)
                for run in (lambda: jta.checked(jax.jit(f))(i), lambda: jta.checked(jax.jit(lambda: f(i)))(),
                            lambda: jax.jit(f)(i)):
                    try:
                        jax.block_until_ready(run())
                    except jta.errors.InvalidArgumentError as e:
                        assert str(s) in str(e), (name, e)
                    except jax.errors.JaxRuntimeError:
                        assert str(s) in str(_thrown()), name
                    else:
                        raise AssertionError(("no error", name, s))
print("ok")
'''


@pytest.mark.long_only
@pytest.mark.parametrize("flags", ["tests", "xla"])
def test_slot_at_int32_max_compiles_and_runs(flags):
    """``jta_slot`` at the constant slot 2**31 - 1 (and - 2), and TensorArray reads and writes at
    those indices (int32, int64), under ``jta.checked``, a bare ``jax.jit`` and ``lax.scan``, with
    the suite's XLA flags and with XLA's defaults: an XLA:CPU crash was once seen with such a
    slot in a generated program (``tests/test_known.py`` keeps its slots small since)."""
    import os
    import subprocess
    import sys

    from tests.helpers import xla
    env = dict(os.environ, XLA_FLAGS=xla.FAST_FLAGS if flags == "tests" else "")
    env.pop("JAX_COMPILATION_CACHE_DIR", None)
    proc = subprocess.run([sys.executable, "-c", _SLOT_PROGRAMS], capture_output=True, text=True, env=env, timeout=600)
    assert proc.returncode == 0 and proc.stdout.strip().endswith("ok"), (proc.returncode, proc.stderr[-3000:])
