"""Errors inside compiled code: TensorFlow's first error, reported under ``jit`` exactly as eagerly.

Case by case (a double write then a read or write past the size, dynamic arrays with a capacity,
traced int64 indices, raw ops), then a differential test: random programs of writes, reads,
gathers, scatters and unstacks (double writes followed by reads, dynamic arrays with a capacity,
static and traced gathers past the size, int64 indices under x64), run eagerly and as
``jta.checked(jax.jit(program))``, must agree on the first error's class and text, and on every
value when there is none.
"""

from __future__ import annotations

import dataclasses
import random
from typing import Any, Optional

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jta
from jta import raw_ops as ops
from tests.helpers import budget

ERRORS = (jta.errors.TensorArrayError, ValueError)


def outcome(fn: Any, *args: Any) -> tuple[Optional[tuple[str, str]], Any]:
    try:
        return None, jax.tree_util.tree_map(np.asarray, fn(*args))
    except ERRORS as e:
        return (type(e).__name__, str(e)), None


# -- first error under jit, case by case -----------------------------------------------------

def test_double_write_then_out_of_range_reports_the_double_write_under_jit():
    def f(i, j):
        ta = jta.TensorArray(jnp.float32, size=3, element_shape=())
        return ta.write(i, 1.0).write(i, 2.0).write(j, 3.0)

    eager = outcome(lambda: jta.throw(f(0, 7)))
    jitted = outcome(jta.checked(jax.jit(f)), 0, 7)
    assert eager[0] == jitted[0]
    assert "already been written to" in eager[0][1]


def test_double_write_surfaces_at_a_later_read_of_another_slot():
    @jax.jit
    def f(i):
        ta = jta.TensorArray(jnp.float32, size=3, element_shape=()).write(i, 1.0).write(i, 2.0)
        return ta.read(2)  # the array is not returned: the read must report the double write

    with pytest.raises(jta.errors.InvalidArgumentError, match="already been written to"):
        jta.checked(f)(0)


@pytest.mark.parametrize("op", ["unstack", "scatter", "split", "gather", "gather_past_size"])
def test_dynamic_array_with_capacity_grows_under_jit_as_eagerly(op):
    def f():
        ta = jta.TensorArray(jnp.float32, size=0, dynamic_size=True, capacity=4, element_shape=(1,))
        if op == "unstack":
            ta = ta.unstack(jnp.array([[1.0], [2.0], [3.0]]))
        elif op == "scatter":
            ta = ta.scatter([0, 2], jnp.array([[1.0], [3.0]]))
        elif op == "split":
            ta = ta.split(jnp.array([1.0, 2.0, 3.0]), [1, 1, 1])
        else:
            ta = ta.unstack(jnp.array([[1.0], [2.0]]))
            return ta.size(), ta.gather([3] if op == "gather_past_size" else [1, 0])
        return ta.size(), ta.gather(jnp.arange(3))

    assert _same(outcome(f), outcome(jta.checked(jax.jit(f))))


def _same(a: Any, b: Any) -> bool:
    if a[0] != b[0]:
        return False
    return all(np.array_equal(x, y) for x, y in zip(_leaves_but_flows(a[1]), _leaves_but_flows(b[1]), strict=True))


def _leaves_but_flows(tree: Any) -> list:
    """Every leaf but the arrays' flows, which tell arrays apart (each new array's is distinct)."""
    return [x for path, x in jax.tree_util.tree_leaves_with_path(tree) if "flow" not in jax.tree_util.keystr(path)]


def test_traced_int64_index_is_range_checked_before_narrowing():
    with jax.enable_x64(True):
        def f(i):
            return jta.TensorArray(jnp.float32, size=3, element_shape=()).write(i, 1.0)

        i = jnp.int64(2**33 + 1)
        eager = outcome(lambda: jta.throw(f(i)))
        jitted = outcome(jta.checked(jax.jit(f)), i)
        assert eager[0] == jitted[0]
        assert eager[0][1].endswith("Tried to write to index 8589934593 but array is not resizeable and size is: 3")


def test_raw_ops_read_out_of_range_recorded_in_the_state_under_jit():
    def f(i):
        state = ops.new_state()
        state, h, flow = ops.TensorArrayV3(state, 3, jnp.float32, element_shape=())
        state, v = ops.TensorArrayReadV3(state, h, i, flow, jnp.float32)
        return state, v

    with pytest.raises(jta.errors.InvalidArgumentError, match="Tried to read from index 7 but array size is: 3"):
        jta.checked(jax.jit(f))(7)


def test_errors_from_compiled_code_are_jta_classes_and_quiet(capfd):
    @jta.checked
    @jax.jit
    def f(i):
        return jta.TensorArray(jnp.float32, size=3, element_shape=()).read(i)

    with pytest.raises(jta.errors.InvalidArgumentError, match="Tried to read from index 5"):
        f(5)
    assert "callback failed" not in capfd.readouterr().err
    assert f(1) == 0.0


def test_throw_without_arguments_raises_what_compiled_code_raised():
    f = jax.jit(lambda i: jta.TensorArray(jnp.float32, size=3, element_shape=()).read(i))
    with pytest.raises(jax.errors.JaxRuntimeError):
        jax.block_until_ready(f(9))
    with pytest.raises(jta.errors.InvalidArgumentError, match="Tried to read from index 9"):
        jta.throw()
    jta.throw()  # raised once: nothing is left


# -- differential: random programs, eager vs jta.checked(jax.jit(...)) ------------------------

@dataclasses.dataclass(frozen=True)
class Op:
    kind: str  # write | read | gather | scatter | unstack
    index: Any  # an int, or a tuple of ints
    traced: bool


@dataclasses.dataclass(frozen=True)
class Program:
    size: int
    capacity: Optional[int]  # a dynamic_size array with a static capacity, else fixed size
    ops: tuple[Op, ...]
    x64: bool

    def make(self) -> jta.TensorArray:
        if self.capacity is None:
            return jta.TensorArray(jnp.float32, size=self.size, element_shape=())
        return jta.TensorArray(jnp.float32, size=self.size, dynamic_size=True, capacity=self.capacity,
                               element_shape=())

    def run(self, *traced: Any) -> Any:
        ta, values, args = self.make(), [], iter(traced)
        for k, op in enumerate(self.ops):
            index = next(args) if op.traced else op.index
            if op.kind == "write":
                ta = ta.write(index, float(k + 1))
            elif op.kind == "read":
                values.append(ta.read(index))
            elif op.kind == "gather":
                values.append(ta.gather(index))
            elif op.kind == "scatter":
                ta = ta.scatter(index, jnp.arange(len(op.index), dtype=jnp.float32) + 10 * k)
            else:
                ta = ta.unstack(jnp.arange(op.index, dtype=jnp.float32) + 10 * k)
        return ta, values

    def traced_args(self) -> list[Any]:
        dtype = jnp.int64 if self.x64 else jnp.int32
        return [jnp.asarray(op.index, dtype) for op in self.ops if op.traced]


def random_program(rng: random.Random) -> Program:
    dynamic = rng.random() < 0.4
    size = rng.randint(0, 3) if dynamic else rng.randint(1, 4)
    capacity = size + rng.randint(1, 3) if dynamic else None
    limit = capacity if dynamic else size
    x64 = rng.random() < 0.25
    big = [2**33 + 1] if x64 else []

    def index(traced: bool) -> int:
        # Static indices of a fixed-size array stay in range: out of range, they raise while
        # tracing, before an earlier op's error recorded at a traced value (documented in README).
        if not traced and not dynamic:
            return rng.randrange(size)
        if traced and rng.random() < 0.3:
            return rng.choice([-1, limit, limit + 1, *big])
        return rng.randrange(limit) if limit else 0

    ops_ = []
    for _ in range(rng.randint(1, 6)):
        kind = rng.choice(["write", "write", "read", "gather", "scatter", "unstack"])
        traced = rng.random() < 0.6
        if kind in ("write", "read"):
            ops_.append(Op(kind, index(traced), traced))
        elif kind in ("gather", "scatter"):
            n = rng.randint(1, 3)
            if kind == "gather" and not traced and dynamic:  # static gathers past a traced size
                ops_.append(Op(kind, tuple(rng.randrange(limit + 2) for _ in range(n)), False))
            else:
                ops_.append(Op(kind, tuple(index(traced) for _ in range(n)), traced))
        else:
            ops_.append(Op(kind, rng.randint(1, limit) if limit else 1, False))
    return Program(size, capacity, tuple(ops_), x64)


def _first_error_and_values(program: Program, jit: bool) -> tuple[Optional[tuple[str, str]], Any]:
    args = program.traced_args()
    if jit:
        return outcome(jta.checked(jax.jit(program.run)), *args)
    return outcome(lambda *a: jta.throw(program.run(*a)), *args)


CHUNKS = 6  # separate tests, so that pytest-xdist spreads the programs over its workers


@pytest.mark.long
@pytest.mark.parametrize("chunk", range(CHUNKS))
def test_random_programs_jit_agrees_with_eager(chunk):
    # 100 by default (150 until the TF1 importer's tests needed the time): the structural fuzzer
    # (test_structural_fuzz.py) runs 198 more programs, with program structure around these ops;
    # 3000 under --long.
    count = 3000 if budget.LONG else 12
    rng = random.Random(20261123)
    programs = [random_program(rng) for _ in range(count)][chunk::CHUNKS]
    mismatches, kinds = [], {"error": 0, "ok": 0}
    for program in programs:
        with jax.enable_x64(program.x64):
            eager = _first_error_and_values(program, jit=False)
            jitted = _first_error_and_values(program, jit=True)
            same = eager[0] == jitted[0] and (eager[0] is not None or _same(eager, jitted))
        kinds["error" if eager[0] else "ok"] += 1
        if not same:
            mismatches.append((program, eager[0], jitted[0]))
    print(f"{len(programs)} programs: {kinds['error']} ended in an error, {kinds['ok']} did not")
    assert not mismatches, "\n".join(f"{p}\n  eager: {e}\n  jit:   {j}" for p, e, j in mismatches[:5])
