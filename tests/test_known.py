"""Values known while tracing (``jta._delivery.known``) are the values XLA computes.

:func:`known.value` evaluates in NumPy, while tracing, the integer and boolean values a program
holds then; ``hoisting.decide_known`` and the error channel act on them (a check known to pass
is not staged, a loop's decision is made then). A value it gives that differs from XLA's would
report a wrong error or miss one, so :func:`test_known_values_are_xla_values` generates random
small programs from the primitives ``known`` evaluates (compositions at random integer dtypes,
``bool``, x64 ones too, at the edges: wrap-around, the dtype's extremes, negative and
division and remainder by the lowest value and -1, out-of-range gather/scatter indices under every mode ``jnp`` makes, duplicate scatter indices,
empty and 0-d shapes, nested ``jit``, jta's own ``jta_record``/``jta_slot``), asks ``known.value``
for each intermediate inside the trace, and compares every answer it gives with the value the
same program computes under ``jax.jit``: dtype, shape and bits. ``None`` (unknown) is always
allowed. :func:`test_known_loops_decide_as_eager` does the same for ``known.per_step`` through
``hoisting.decide_known``: scans whose indices are known while tracing (counters from negative
constants, strides, wrap-around in ``int8``, reversed, unrolled) report the eager first error."""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax
from jax._src.lax.slicing import GatherScatterMode

import jta
from jta._delivery import hoisting, known
from jta._records import primitives, slots
from tests.helpers import budget

INTS32 = [np.int8, np.uint8, np.int16, np.uint16, np.int32, np.uint32]
INTS64 = [np.int64, np.uint64]


class Program:
    """A random program: ``build(d)`` makes its values (``d`` an argument: unknown while
    tracing) and asks ``known.value`` for each, in the trace; the values come back as outputs."""

    def __init__(self, seed: int, x64: bool):
        self.seed, self.x64 = seed, x64
        self.ints = INTS32 + (INTS64 if x64 else [])
        self.asked: list = []
        self.ops: list[str] = []

    # -- values ---------------------------------------------------------------------------------
    def edge(self, dtype) -> int:
        rng = self.rng
        if dtype == np.bool_:
            return bool(rng.integers(2))
        info = np.iinfo(dtype)
        pick = rng.integers(8)
        if pick == 0:
            return int(info.min)
        if pick == 1:
            return int(info.max)
        if pick == 2:
            return int(info.max) - int(rng.integers(3))
        if pick == 3:
            return int(info.min) + int(rng.integers(3))
        lo, hi = max(int(info.min), -9), min(int(info.max), 9)
        return int(rng.integers(lo, hi + 1))

    def dtype(self):
        return self.ints[self.rng.integers(len(self.ints))] if self.rng.random() < 0.85 else np.bool_

    def shape(self):
        r = self.rng.random()
        if r < 0.3:
            return ()
        if r < 0.9:
            return (int(self.rng.choice([0, 1, 2, 3, 4, 5, 7])),)
        return (int(self.rng.integers(0, 3)), int(self.rng.integers(1, 4)))

    def const(self, dtype=None, shape=None):
        dtype = self.dtype() if dtype is None else dtype
        shape = self.shape() if shape is None else shape
        vals = np.array([self.edge(dtype) for _ in range(int(np.prod(shape)))], dtype=object)
        return jnp.asarray(np.array(vals.reshape(shape).tolist() if shape else vals[0], dtype=dtype))

    def pick(self, pred=lambda x: True, default=None):
        got = [v for v in self.pool if pred(v)]
        return got[self.rng.integers(len(got))] if got else default

    def like(self, x, dtype):
        """``x`` converted to ``dtype`` (a convert when it differs)."""
        return x if x.dtype == dtype else lax.convert_element_type(x, dtype)

    def shaped(self, b, shape):
        """``b`` made of ``shape``: broadcast when a scalar, else a reduction broadcast."""
        if b.shape == shape:
            return b
        if b.ndim:
            b = jnp.max(b) if b.size else jnp.zeros((), b.dtype)
        return jnp.broadcast_to(b, shape)

    def index(self, n, size, dtype=None):
        """Indices around ``[-n - 2, n + 2)``, some from the pool."""
        dtype = dtype if dtype is not None else self.rng.choice([np.int32, np.int8, np.uint8, np.int16, np.uint32]
                                         + ([np.int64, np.uint64] if self.x64 else []))
        lo, hi = -n - 2, n + 2
        raw = self.rng.integers(lo, hi + 1, size)
        if np.dtype(dtype).kind == "u":
            raw = np.where(raw < 0, np.iinfo(dtype).max - raw, raw) if self.rng.random() < 0.3 else np.abs(raw)
        raw = raw.astype(object) % (int(np.iinfo(dtype).max) + 1) if np.dtype(dtype).kind == "u" else raw
        if self.rng.random() < 0.3 and size > 1:
            raw[1:] = raw[0]  # duplicates
        j = jnp.asarray(np.array(list(raw), dtype=dtype).reshape(size))
        if self.rng.random() < 0.3:
            other = self.pick(lambda v: v.ndim == 1 and v.shape[0] == size and v.dtype != np.bool_)
            if other is not None:
                j = other
        return j

    # -- ops ------------------------------------------------------------------------------------
    def op(self, d):
        rng = self.rng
        kind = rng.choice(["const", "arange", "iota", "unary", "convert", "binary", "scalar", "compare", "select",
                           "select_n", "clamp", "shape", "concat", "reduce", "argmax", "gather", "scatter",
                           "dynamic_slice", "jit", "record", "slot", "unknown", "raw"],
                          p=np.array([4, 3, 2, 4, 5, 8, 3, 4, 3, 2, 2, 3, 2, 3, 2, 6, 6, 3, 3, 1, 2, 1, 3], float) / 75)
        self.ops.append(str(kind))
        if kind == "jit":
            return self.op_of(str(rng.choice(["binary", "gather", "scatter", "select", "convert", "reduce", "clamp"])), d)
        return self.op_of(str(kind), d)

    def op_of(self, kind, d):
        rng = self.rng
        wrap = (lambda f: jax.jit(f)) if self.ops[-1] == "jit" else (lambda f: f)
        if kind == "const":
            return self.const()
        if kind == "unknown":
            return self.like(d, self.dtype())
        if kind == "arange":
            dt = self.ints[rng.integers(len(self.ints))]
            n = int(rng.choice([0, 1, 3, 5, 130, 300]))
            start = int(rng.integers(-3, 3)) if np.dtype(dt).kind == "i" else 0
            return jnp.arange(start, start + n, dtype=dt) if rng.random() < 0.5 else jnp.arange(n, dtype=dt)
        if kind == "iota":
            dt = self.ints[rng.integers(len(self.ints))]
            if rng.random() < 0.5:
                return lax.iota(dt, int(rng.choice([0, 2, 5, 260])))
            shape = (int(rng.integers(0, 3)), int(rng.integers(1, 4)))
            return lax.broadcasted_iota(dt, shape, int(rng.integers(2)))
        x = self.pick()
        if kind == "unary":
            if x.dtype == np.bool_:
                return wrap(lambda x: ~x)(x)
            return wrap(lambda x: -x if rng.random() < 0.6 else ~x)(x)
        if kind == "convert":
            dt = self.dtype()
            return wrap(lambda x: x.astype(dt) if rng.random() < 0.5 else lax.convert_element_type(x, dt))(x)
        if kind in ("binary", "scalar", "compare"):
            dt = x.dtype
            if kind == "scalar":
                if dt == np.bool_:
                    return x & True
                c = self.edge(dt)
                c = c if abs(c) < 2**31 else 1
                fn = [lambda x: x + c, lambda x: x * c, lambda x: c - x, lambda x: jnp.maximum(x, c)][rng.integers(4)]
                try:
                    return fn(x)
                except (OverflowError, TypeError):
                    return None
            y = self.shaped(self.like(self.pick(), dt), x.shape)
            if kind == "compare":
                fn = [jnp.equal, jnp.not_equal, jnp.less, jnp.less_equal, jnp.greater, jnp.greater_equal][rng.integers(6)]
            elif dt == np.bool_:
                fn = [jnp.logical_and, jnp.logical_or, jnp.logical_xor, jnp.maximum, jnp.minimum][rng.integers(5)]
            else:
                fn = [jnp.add, jnp.subtract, jnp.multiply, jnp.maximum, jnp.minimum, jnp.bitwise_and,
                      jnp.bitwise_or, jnp.bitwise_xor, lax.shift_left, lax.shift_right_logical,
                      lax.shift_right_arithmetic, jnp.left_shift, jnp.right_shift, jnp.remainder, jnp.floor_divide,
                      # (XLA:CPU dies of SIGFPE on lax's integer division by zero; jnp's guards it)
                      lambda x, y: lax.div(x, y | 1), lambda x, y: lax.rem(x, y | 1)][rng.integers(17)]
            return wrap(fn)(x, y)
        if kind == "select":
            c = self.shaped(self.like(self.pick(), np.bool_), x.shape)
            y = self.shaped(self.like(self.pick(), x.dtype), x.shape)
            return wrap(jnp.where)(c, x, y)
        if kind == "select_n":
            n = int(rng.integers(1, 5))
            cases = [x] + [self.shaped(self.like(self.pick(), x.dtype), x.shape) for _ in range(n - 1)]
            w = self.pick()
            wd = np.bool_ if n <= 2 and rng.random() < 0.5 else np.int32
            which = self.like(w, wd)
            which = which if which.shape in ((), x.shape) else self.shaped(which, x.shape)
            if wd == np.bool_ and n == 1:
                return None
            if wd == np.int32 and rng.random() < 0.7:  # in range, as lax promises
                which = lax.clamp(np.int32(0), which, np.int32(n - 1)) if n > 1 else jnp.zeros_like(which)
            if wd == np.bool_ and n == 1:
                return None
            return wrap(lambda w, *c: lax.select_n(w, *c))(which, *cases)
        if kind == "clamp":
            if x.dtype == np.bool_:
                return None
            lo = self.like(self.pick(lambda v: v.ndim == 0, self.const(x.dtype, ())), x.dtype)
            hi = self.like(self.pick(lambda v: v.ndim == 0, self.const(x.dtype, ())), x.dtype)
            if rng.random() < 0.3:
                lo = self.shaped(lo, x.shape)
            return wrap(lax.clamp)(lo, x, hi) if rng.random() < 0.7 else wrap(jnp.clip)(x, lo, hi)
        if kind == "shape":
            r = rng.integers(5)
            if r == 0:
                return x.reshape(-1) if x.ndim != 1 else x.reshape(1, -1)
            if r == 1:
                return jnp.broadcast_to(x, (2,) + x.shape) if x.ndim < 2 else x.reshape(-1)
            if r == 2:
                return x[None]
            if r == 3:
                return jnp.squeeze(x[None], 0)
            return x.reshape(x.shape + (1,)).squeeze(-1) if x.ndim < 2 else x.T.reshape(-1)
        if kind == "concat":
            if x.ndim != 1:
                x = x.reshape(-1)
            y = self.like(self.pick(), x.dtype).reshape(-1)
            return wrap(lambda a, b: jnp.concatenate([a, b, a]))(x, y)
        if kind == "reduce":
            if x.ndim == 0:
                return None
            axis = int(rng.integers(x.ndim))
            if x.shape[axis] == 0 and rng.random() < 0.5:
                pass  # an empty reduction: its identity
            if x.dtype == np.bool_:
                fn = [jnp.any, jnp.all, jnp.max, jnp.min][rng.integers(4)]
            else:
                fn = [jnp.max, jnp.min,
                      lambda x, axis: lax.reduce(x, np.array(-1, x.dtype), lax.bitwise_and, (axis,)),
                      lambda x, axis: lax.reduce(x, np.array(0, x.dtype), lax.bitwise_or, (axis,)),
                      lambda x, axis: lax.reduce(x, np.array(0, x.dtype), lax.bitwise_xor, (axis,)),
                      lambda x, axis: lax.reduce(x, np.array(0, x.dtype), lax.add, (axis,)),
                      ][rng.integers(6)]
            if x.shape[axis] == 0 and fn in (jnp.max, jnp.min):
                return lax.reduce_max_p.bind(x, axes=(axis,), out_sharding=None) if fn is jnp.max else None
            return wrap(functools.partial(fn, axis=axis))(x)
        if kind == "argmax":
            if x.ndim == 0 or 0 in x.shape:
                return None
            axis = int(rng.integers(x.ndim))
            idt = [np.int32, np.int8, np.uint8][rng.integers(3)]
            return lax.argmax(x, axis, idt) if rng.random() < 0.5 else wrap(functools.partial(jnp.argmax, axis=axis))(x)
        x1 = self.pick(lambda v: v.ndim == 1)
        if x1 is None:
            return None
        n = x1.shape[0]
        if kind == "gather":
            size = int(rng.choice([0, 1, 3, 5]))
            if rng.random() < 0.25:  # a scalar index: a dynamic_slice
                j = self.index(n, ())
                return wrap(lambda x, j: x[j])(x1, j) if n else None
            j = self.index(n, (size,))
            mode = rng.choice(["clip", "fill", "promise_in_bounds", None, "drop_fill"])
            if mode == "drop_fill":
                fv = self.edge(x1.dtype) if x1.dtype != np.bool_ else True
                fv = fv if abs(int(fv)) < 2**31 else None
                return wrap(lambda x, j: x.at[j].get(mode="fill", fill_value=fv))(x1, j)
            if mode == "promise_in_bounds" and not n:
                return None
            if rng.random() < 0.3:
                return wrap(lambda x, j: jnp.take(x, j, mode=None if mode is None else str(mode).replace("promise_in_bounds", "clip")))(x1, j)
            return wrap(lambda x, j: x.at[j].get(mode=mode))(x1, j)
        if kind == "raw":  # lax's gather and scatters as x.at[j] makes them, indices as given
            size = int(rng.choice([0, 1, 3]))
            j = self.index(n, (size,))[:, None]
            mode = [GatherScatterMode.CLIP, GatherScatterMode.FILL_OR_DROP,
                    GatherScatterMode.PROMISE_IN_BOUNDS][rng.integers(3)]
            if rng.random() < 0.4:
                dnums = lax.GatherDimensionNumbers(offset_dims=(), collapsed_slice_dims=(0,), start_index_map=(0,))
                fill = None if x1.dtype == np.bool_ or rng.random() < 0.5 else self.edge(x1.dtype)
                if mode != GatherScatterMode.FILL_OR_DROP:
                    fill = None
                return wrap(lambda x, j: lax.gather(x, j, dnums, (1,), mode=mode, fill_value=fill))(x1, j)
            dnums = lax.ScatterDimensionNumbers(update_window_dims=(), inserted_window_dims=(0,),
                                                scatter_dims_to_operand_dims=(0,))
            u = self.const(x1.dtype, (size,))
            fn = [lax.scatter, lax.scatter_add, lax.scatter_min, lax.scatter_max][rng.integers(4)]
            return wrap(lambda x, j, u: fn(x, j, u, dnums, mode=mode))(x1, j, u)
        if kind == "scatter":
            size = int(rng.choice([0, 1, 2, 3, 5]))
            j = self.index(n, (size,))
            u = self.pick(lambda v: v.ndim == 0 or v.shape == (size,))
            u = self.like(u, x1.dtype) if u is not None else self.const(x1.dtype, (size,))
            how = rng.choice(["set", "add", "min", "max", "mul"] if x1.dtype != np.bool_ else ["set", "min", "max"])
            mode = rng.choice(["clip", "drop", "fill", "promise_in_bounds", None])
            return wrap(lambda x, j, u: getattr(x.at[j], how)(u, mode=mode))(x1, j, u)
        if kind == "dynamic_slice":
            if n == 0:
                return None
            k = int(rng.integers(0, n + 1))
            s = self.pick(lambda v: v.ndim == 0 and v.dtype != np.bool_)
            s = s if s is not None and rng.random() < 0.6 else self.const(self.ints[rng.integers(len(self.ints))], ())
            if rng.random() < 0.5:
                return wrap(lambda x, s: lax.dynamic_slice_in_dim(x, s, k))(x1, s)
            return wrap(lambda x, s: lax.dynamic_slice(x, (s,), (k,)))(x1, s)
        if kind == "record":
            dt = np.int64 if self.x64 else np.int32
            error = self.pick(lambda v: v.shape == (4,))
            error = self.like(error, dt) if error is not None else self.const(dt, (4,))
            bad = self.like(self.shaped(self.pick(), ()), np.bool_)
            entry = self.like(self.shaped(self.pick(), (4,)), dt)
            return primitives.merge(error, bad, entry)
        if kind == "slot":
            if n == 0:
                return None
            flags = self.like(x1, np.int32) & 31
            dt = np.int64 if self.x64 else np.int32
            record = self.pick(lambda v: v.shape == (4,))
            record = self.like(record, dt) if record is not None else jnp.zeros((4,), dt)
            s = self.like(self.shaped(self.pick(lambda v: v.dtype != np.bool_, self.const(np.int32, ())), ()), np.int32)
            # (a slot at 2**31 - 1 can crash XLA's CPU compiler, so slots stay small; negative ones too)
            s = (s & 15) - (4 if rng.random() < 0.3 else 0)
            out_flags, out_record = slots.update(flags, record, s, str(rng.choice(slots.OPS)))
            self.pool.append(out_flags)
            self.asked.append(out_flags)
            return out_record
        raise AssertionError(kind)

    def build(self, d):
        self.rng = np.random.default_rng(self.seed)
        self.pool, self.asked, self.ops = [d, self.const(), self.const(np.int32, (3,))], [], []
        for _ in range(int(self.rng.integers(8, 30))):
            try:
                out = self.op(d)
            except (TypeError, OverflowError, IndexError, jax.errors.JAXTypeError) as e:  # a combination lax rejects
                if "known" in str(e):
                    raise
                continue
            if out is not None:
                self.pool.append(out)
                self.asked.append(out)
        memo: dict = {}
        self.values = [known.value(v, memo) for v in self.asked]
        self.fresh = [known.value(v) for v in self.asked]  # (without the memo: the same answers)
        return list(self.asked)


def _same(got, want) -> bool:
    want = np.asarray(want)
    return (got.dtype == want.dtype and got.shape == want.shape
            and np.array_equal(np.ascontiguousarray(got).reshape(-1).view(np.uint8),
                               np.ascontiguousarray(want).reshape(-1).view(np.uint8)))


def run_program(seed: int, x64: bool) -> tuple[int, list[str]]:
    """One program: ``(values known, mismatches)``."""
    p = Program(seed, x64)
    with jax.enable_x64(x64):
        outs = jax.jit(p.build)(jnp.int32(3))
    bad = []
    for k, (got, fresh, want) in enumerate(zip(p.values, p.fresh, outs, strict=True)):
        for g in (got, fresh):
            if g is not None and not _same(np.asarray(g), want):
                bad.append(f"seed {seed} x64={x64} value {k}: known {g!r} ({g.dtype}), XLA {np.asarray(want)!r}")
                break
    return sum(v is not None for v in p.values), bad


_DN = lax.ScatterDimensionNumbers(update_window_dims=(), inserted_window_dims=(0,), scatter_dims_to_operand_dims=(0,))
# Each class of wrong answer the generator found, as one program (fixed in ``known``).
CLASSES = {
    "reduce_and of integers is bitwise": lambda: lax.reduce(jnp.array([6, 3], jnp.int32), np.int32(-1), lax.bitwise_and, (0,)),
    "reduce_or of integers is bitwise": lambda: lax.reduce(jnp.array([6, 3], jnp.uint16), np.uint16(0), lax.bitwise_or, (0,)),
    "reduce_max over an empty axis": lambda: lax.reduce_max_p.bind(jnp.zeros((0,), jnp.int8), axes=(0,), out_sharding=None),
    "select_n with which out of range": lambda: lax.select_n(jnp.array([-1, 5], jnp.int32), jnp.arange(2), jnp.arange(2) + 7),
    "an int8 index into 300 rows": lambda: lax.scatter_add(jnp.arange(300, dtype=jnp.int8), jnp.array([[48]], jnp.int8),
                                                          jnp.array([1], jnp.int8), _DN, mode="clip"),
    "an unsigned start index with its top bit": lambda: lax.dynamic_slice(jnp.arange(3), (jnp.uint8(255),), (1,)),
    "shifts by the width or more": lambda: lax.shift_right_arithmetic(jnp.array([-8, 8, -1], jnp.int8),
                                                                     jnp.array([9, 100, 3], jnp.int8)),
}


@pytest.mark.parametrize("name", CLASSES)
def test_mismatch_class(name):
    got = []

    def f(d):
        out = CLASSES[name]()
        got.append(known.value(out))
        return out

    want = jax.jit(f)(0)
    assert got[0] is None or _same(got[0], want), (got[0], want)


def test_a_uint64_counter_wraps_in_uint64():
    """A counter from ``2**64 - 2`` (x64): its steps computed in its dtype (it was float64: every
    step's index was one value). Indices past ``int64`` are reported differently (a separate
    issue), so the program writes slot 1 for those: written twice at step 1."""
    with jax.enable_x64(True):
        def f(dummy):
            ta = jta.TensorArray(jnp.float32, size=3, element_shape=())

            def step(c, _):
                ta, i = c
                return (ta.write(jnp.where(i < np.uint64(5), i, np.uint64(1)), 1.0), i + np.uint64(1)), None

            return lax.scan(step, (ta, jnp.uint64(2**64 - 2)), None, length=4)[0][0].stack()

        record, _ = jax.jit(jta.checkify(f))(0)
        with jax.disable_jit():
            try:
                jta.throw(f(0))
                want = None
            except jta.errors.TensorArrayError as e:
                want = str(e)
        assert str(record.exception) == want


N_PROGRAMS = budget.scaled(8, 3000)


@pytest.mark.long
def test_known_values_are_xla_values():
    """Every value ``known.value`` gives while tracing is the value XLA computes (bits and dtype)."""
    bad, count = [], 0
    for seed in range(N_PROGRAMS):
        n, b = run_program(seed, x64=seed % 3 == 2)
        count += n
        bad += b
    assert not bad, "\n".join(bad[:20])
    assert count > N_PROGRAMS * 3  # (most values are known: the test tests something)


# -- loops decided while tracing (known.per_step through hoisting.decide_known) ------------------
def loop_program(seed: int, x64: bool):
    """A random scan whose TensorArray indices are known while tracing: a counter from a
    (perhaps negative, perhaps extreme) constant with a stride, or a scanned ``arange`` with a
    stride, at a random integer dtype (wrapping in ``int8``), reversed or unrolled, with writes
    and clearing reads at indices computed from them (in range or not, repeated or not)."""
    rng = np.random.default_rng(seed)
    ints = INTS32 + (INTS64 if x64 else [])
    dt = ints[rng.integers(len(ints))]
    info = np.iinfo(dt)
    size = int(rng.integers(1, 7))
    length = int(rng.integers(1, 9))
    start = int(rng.choice([0, 1, -3, -1, int(info.max) - 2, int(info.min), int(info.max) // 2, size - 1]))
    start = min(max(start, int(info.min)), int(info.max))
    stride = int(rng.choice([1, 1, 2, 3, -1, -2, 50, int(info.max)]))
    stride = stride if info.min <= stride <= info.max else 1
    reverse, unroll = bool(rng.integers(2)), int(rng.choice([1, 1, 2, 3]))
    source = str(rng.choice(["counter", "xs", "both", "fori"]))
    shift = int(rng.integers(-3, 4))
    how = str(rng.choice(["plain", "shift", "where", "clip", "mod", "mul"]))
    reads = bool(rng.integers(2))
    lo = int(rng.integers(-3, 2))

    def index(i, t):
        j = i if t is None else (t if i is None else i + t)
        if how == "shift":
            j = j + np.asarray(shift).astype(dt)
        elif how == "where":
            j = jnp.where(j > np.asarray(size // 2).astype(dt), j, np.asarray(size - 1).astype(dt))
        elif how == "clip":
            j = jnp.clip(j, np.asarray(0).astype(dt), np.asarray(size).astype(dt))
        elif how == "mod":
            j = j & np.asarray(7).astype(dt)
        elif how == "mul":
            j = j * np.asarray(2).astype(dt)
        if dt == np.uint64:  # (a uint64 index past int64 is reported as int64's: keep them small)
            j = jnp.where(j < np.uint64(size + 2), j, np.uint64(size - 1))
        return j

    def program(dummy):
        ta = jta.TensorArray(jnp.float32, size=size, element_shape=())
        src = jta.TensorArray(jnp.float32, size=size, element_shape=()).unstack(jnp.arange(size, dtype=jnp.float32))
        first = jnp.asarray(np.asarray(start).astype(dt))
        step_ = np.asarray(stride).astype(dt)
        if source == "fori":
            def body(i, c):
                ta, src = c
                j = index(jnp.asarray(i).astype(dt), None)
                out = src.read(j) if reads else jnp.float32(0)
                return (ta.write(j, 1.0 + out), src)
            ta, src = lax.fori_loop(lo, lo + length, body, (ta, src))
            return ta.stack()
        xs = None
        if source in ("xs", "both"):
            xs = (jnp.arange(length, dtype=dt) * step_ + first).astype(dt)

        def body(c, t):
            ta, src, i = c
            j = index(i if source != "xs" else None, t)
            out = jnp.float32(0)
            if reads:
                out = src.read(j)
            return (ta.write(j, 1.0 + out), src, i + step_), None

        (ta, src, _), _ = lax.scan(body, (ta, src, first), xs, length=length, reverse=reverse, unroll=unroll)
        return ta.stack()

    return program


def _outcome(run):
    try:
        return np.asarray(run()), None
    except jta.errors.TensorArrayError as e:
        return None, (type(e).__name__, str(e))


def run_loop(seed: int, x64: bool, made: list) -> list[str]:
    program = loop_program(seed, x64)
    with jax.enable_x64(x64):
        with jax.disable_jit():
            want = _outcome(lambda: jta.throw(program(0)))
        before = len(made)
        checked = jax.jit(jta.checkify(program))

        def compiled():
            record, out = checked(0)
            jta.throw(record)
            return out
        got = _outcome(compiled)
    bad = []
    if want[1] != got[1] or (want[1] is None and not np.array_equal(want[0], got[0])):
        bad.append(f"loop seed {seed} x64={x64}: eager {want[1] or want[0]}, compiled {got[1] or got[0]}")
    if len(made) == before:
        bad.append(f"loop seed {seed} x64={x64}: no loop decided")
    return bad


N_LOOPS = budget.scaled(3, 1500)


@pytest.mark.long
def test_known_loops_decide_as_eager(monkeypatch):
    """Scans whose indices are known while tracing: decided then (``hoisting.decide_known``
    gives a decision), with eager's first error."""
    made: list = []
    original = hoisting.decide_known

    def spy(*a, **k):
        out = original(*a, **k)
        made.append(out) if out is not None else None
        return out

    monkeypatch.setattr(hoisting, "decide_known", spy)
    bad = []
    for seed in range(N_LOOPS):
        bad += run_loop(seed, x64=seed % 4 == 3, made=made)
    assert not bad, "\n".join(bad[:20])



def _sliced_rows(x: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
    """The rows of ``n`` that XLA's dynamic slice reads, and its dynamic update writes, at each
    index of ``x`` (one compiled program)."""
    def rows(indices):
        data, zeros = jnp.arange(n, dtype=jnp.int32), jnp.zeros(n, jnp.int32)
        read = [lax.dynamic_index_in_dim(data, j, keepdims=False, allow_negative_indices=False) for j in indices]
        wrote = [jnp.argmax(lax.dynamic_update_index_in_dim(zeros, np.int32(1), j, 0, allow_negative_indices=False))
                 for j in indices]
        return jnp.stack(read), jnp.stack(wrote)

    read, wrote = jax.jit(rows)(list(jnp.asarray(x)))
    return np.asarray(read), np.asarray(wrote)


def test_starts_are_the_rows_xla_slices():
    """``known.starts`` (the rows a differentiated scan's rewrite moves out of the loop) is the
    row a dynamic slice reads and a dynamic update writes, at every index it gives rows for."""
    rng, checked = np.random.default_rng(0), 0
    for x64, dtypes in ((False, INTS32), (True, INTS64)):
        with jax.enable_x64(x64):
            for dtype, n in [(d, n) for d in dtypes for n in (3, 300)]:
                info = np.iinfo(dtype)
                picks = [int(info.min), int(info.max), 0, 1, -1, n - 1, n, n + 1, 2**31, 2**32 - 1]
                picks += [int(v) for v in rng.integers(-2 * n, 2 * n, 3)]
                x = np.array([v for v in picks if info.min <= v <= info.max], dtype)
                rows = [known.starts(x[k:k + 1], n) for k in range(x.size)]  # (None: left to XLA)
                x = np.array([v for v, r in zip(x, rows, strict=True) if r is not None], dtype)
                if x.size:
                    checked += x.size
                    read, wrote = _sliced_rows(x, n)
                    want = np.concatenate([r for r in rows if r is not None])
                    np.testing.assert_array_equal(read, want, err_msg=f"{np.dtype(dtype).name} into {n}: {x}")
                    np.testing.assert_array_equal(wrote, want, err_msg=f"{np.dtype(dtype).name} into {n}: {x}")
    assert checked > 100


def test_one_output_of_a_nested_jit_whose_other_inputs_are_unknown():
    """A nested jit reads an argument (unknown) and constants: the output made from the constants
    alone is known (its body cut down to that output) and is XLA's; the one that reads the argument
    is not known."""
    seen = {}

    @jax.jit
    def inner(x, k):
        return x * 2.0, k * 7 + 1, jnp.sum(x).astype(jnp.int32) + k

    def outer(x):
        _, from_constants, from_argument = inner(x, jnp.arange(6, dtype=jnp.int32))
        seen["known"], seen["unknown"] = known.value(from_constants), known.value(from_argument)
        return from_constants

    want = jax.jit(outer)(jnp.ones(3))
    np.testing.assert_array_equal(seen["known"], np.asarray(want))
    assert seen["unknown"] is None


@pytest.mark.parametrize("dtype", [np.int8, np.uint8, np.int16, np.int32, np.uint32, np.int64, np.uint64])
@pytest.mark.parametrize("op", [lax.div, lax.rem])
def test_integer_division_is_xlas(dtype, op):
    """``div``/``rem`` known while tracing equal XLA's: every pair of 8-bit operands, and the edges
    of wider ones (the lowest value by -1 too), the divisor never 0 (XLA:CPU dies of SIGFPE on it)."""
    info = np.iinfo(dtype)
    if info.bits == 8:
        values = np.arange(info.min, info.max + 1)
    else:
        edges = [info.min, info.min + 1, -7, -3, -2, -1, 0, 1, 2, 3, 7, info.max - 1, info.max]
        values = np.array(sorted({v for v in edges if info.min <= v <= info.max}), dtype)  # (Python ints: exact)
    values = values.astype(dtype)
    a, b = (v.reshape(-1) for v in np.meshgrid(values, values[values != 0]))
    got = []

    def f():
        out = op(jnp.asarray(a.astype(dtype)), jnp.asarray(b.astype(dtype)))
        got.append(known.value(out))
        return out

    with jax.enable_x64(info.bits == 64):
        want = jax.jit(f)()
    assert got[0] is not None and _same(np.asarray(got[0]), want)
