"""Export with symbolic dimensions: random programs exported once, called at several sizes.

``jax.export`` with ``jax.export.symbolic_shape`` compiles one program for every size of a
dimension; jta's checks must then report, at each size, what eager code reports at that size.
The class this fuzzer would have found: a checkified ``lax.scan`` whose length was a symbolic
dimension could not be exported (the scan rule passed ``length=`` as an int), while the
unchecked program could.

Each program is drawn from a seed. Its arguments are ``xs`` (``[n, 3]``, ``n`` symbolic; under
``vmap``, ``[b, n, 3]`` with ``b`` symbolic too) and an index ``i``. Its body is a ``lax.scan``
over ``xs`` (forward or reverse, the arrays carried or closed over; not unrolled, which JAX
cannot export at a symbolic length) whose steps
do one to three TensorArray ops at the loop counter, at ``i`` or at a value of ``xs``: ``read``,
``write``, ``gather``, ``scatter`` on arrays of static sizes, possibly out of range; then a
``stack``, possibly differentiated with ``jax.grad``. The reference is eager
(``jax.disable_jit()`` + ``jta.throw``) at each concrete size; the exported, serialized and
deserialized ``jax.jit(jta.checkify(program))`` must give the same first error (class and text)
or the same values at every size.

``pytest --long`` runs 400 programs (default 8); ``JTA_SYMBOLIC_SEED`` moves the first seed.
"""

from __future__ import annotations

import dataclasses
import os
import random
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jta
from tests.helpers import budget

COUNT = budget.scaled(4, 400)
FIRST = int(os.environ.get("JTA_SYMBOLIC_SEED", "0"))
SIZE = 4  # static size of the arrays the programs make
OPS = ("read", "write", "gather", "scatter")


@dataclasses.dataclass(frozen=True)
class Program:
    seed: int
    ops: tuple[tuple[str, str], ...]  # (op, where: "counter" | "i" | "data")
    reverse: bool
    carried: bool  # the array is the scan's carry (else closed over, read only)
    vmapped: bool
    grad: bool
    sizes: tuple[int, ...]  # the concrete n of each call
    indices: tuple[int, ...]  # the i of each call

    def __str__(self) -> str:
        return (f"seed {self.seed}: ops={self.ops} reverse={self.reverse} "
                f"carried={self.carried} vmapped={self.vmapped} grad={self.grad} sizes={self.sizes} "
                f"indices={self.indices}")


def draw(seed: int) -> Program:
    rng = random.Random(seed)
    carried = rng.random() < 0.7
    ops = tuple((rng.choice(OPS if carried else ("read", "gather")), rng.choice(("counter", "i", "data")))
                for _ in range(rng.randint(1, 3)))
    return Program(seed, ops, rng.random() < 0.4, carried, rng.random() < 0.3,
                   rng.random() < 0.3, tuple(rng.sample((1, 2, 3, 4, 5, 6), 2)),
                   tuple(rng.choice((0, 2, 3, 4, 7, -1)) for _ in range(2)))


def build(p: Program) -> Callable[[jax.Array, jax.Array], Any]:
    """The program as a function of ``(xs, i)``."""
    def program(xs, i):
        def index(where: str, t: jax.Array, x: jax.Array) -> jax.Array:
            if where == "counter":
                return t
            if where == "i":
                return i
            return jnp.floor(jnp.abs(x[0]) * 3).astype(jnp.int32)  # a value of the data, maybe past the end

        def step(total, ta, t, x):
            for op, where in p.ops:
                k = index(where, t, x)
                if op == "read":
                    total = total + ta.read(k % SIZE if where == "counter" else k).sum()
                elif op == "gather":
                    total = total + ta.gather(jnp.stack([k, jnp.int32(0)])).sum()
                elif op == "write":
                    ta = ta.write(k, x * 2.0)
                else:
                    ta = ta.scatter(jnp.stack([k]), x[None] + 1.0)
            return total, ta

        ta = jta.TensorArray(jnp.float32, size=SIZE, element_shape=(3,), clear_after_read=False)
        ta = ta.unstack(jnp.arange(SIZE * 3, dtype=jnp.float32).reshape(SIZE, 3))
        if p.carried:
            def body(carry, tx):
                total, out = step(*carry, *tx)
                return (total, out), total
            init = (jnp.float32(0), ta)
        else:  # closed over: only read
            def body(carry, tx):
                total, _ = step(carry[0], ta, *tx)
                return (total, carry[1]), total
            init = (jnp.float32(0), ta)
        ts = jnp.arange(xs.shape[0], dtype=jnp.int32)
        (total, out), ys = jax.lax.scan(body, init, (ts, xs), reverse=p.reverse)
        return total + ys.sum(), out.stack()

    def run(xs, i):
        if p.grad:
            return jax.grad(lambda xs: program(xs, i)[0])(xs)
        return program(xs, i)

    return jax.vmap(run, in_axes=(0, None)) if p.vmapped else run


def _args(p: Program, n: int, i: int) -> tuple[np.ndarray, np.int32]:
    shape = (2, n, 3) if p.vmapped else (n, 3)
    xs = np.linspace(-1.0, 1.0, int(np.prod(shape)), dtype=np.float32).reshape(shape)
    return xs, np.int32(i)


def _outcome(thunk: Callable[[], Any]) -> tuple[str, Any]:
    try:
        return "ok", [np.asarray(leaf) for leaf in jax.tree_util.tree_leaves(thunk())]
    except Exception as e:  # noqa: BLE001  (the first error is the outcome compared)
        return f"{type(e).__name__}: {e}", None


def check(p: Program) -> list[str]:
    """The mismatches of ``p``'s symbolic export against eager, one line each."""
    f = build(p)
    dims = jax.export.symbolic_shape("b, n")
    xs_shape = (dims[0], dims[1], 3) if p.vmapped else (dims[1], 3)
    spec = (jax.ShapeDtypeStruct(xs_shape, jnp.float32), jax.ShapeDtypeStruct((), jnp.int32))
    try:
        exported = jax.export.deserialize(jax.export.export(jax.jit(jta.checkify(f)))(*spec).serialize())
    except Exception as e:  # noqa: BLE001  (the unchecked program exports: see the module docstring)
        return [f"{p}\n  export failed: {type(e).__name__}: {str(e)[:300]}"]
    found = []
    for n, i in zip(p.sizes, p.indices, strict=True):
        args = _args(p, n, i)
        with jax.disable_jit():
            want = _outcome(lambda args=args: jta.throw(f(*args)))

        def call(args=args):
            errors, out = exported.call(*args)
            jta.throw(errors)
            return out
        got = _outcome(call)
        if want[0] != got[0]:
            found.append(f"{p}\n  n={n} i={i}\n  eager:  {want[0][:300]}\n  export: {got[0][:300]}")
        elif want[1] is not None:
            for a, b in zip(want[1], got[1], strict=True):
                if a.shape != b.shape or not np.allclose(a, b, rtol=1e-5, atol=1e-5):
                    found.append(f"{p}\n  n={n} i={i}\n  values differ: {a} vs {b}")
                    break
    return found


CHUNKS = 2


@pytest.mark.long
@pytest.mark.parametrize("chunk", range(CHUNKS))
def test_symbolic_exports_agree_with_eager(chunk: int) -> None:
    programs = [draw(seed) for seed in range(FIRST, FIRST + COUNT)][chunk::CHUNKS]
    found = [m for p in programs for m in check(p)]
    errors = sum(1 for p in programs for n, i in zip(p.sizes, p.indices, strict=True) if i < 0 or i >= SIZE)
    assert not found, f"{len(found)} mismatches of {len(programs)} programs:\n" + "\n".join(found[:5])
    assert errors > 0 or len(programs) < 4  # the draws do reach errors


def test_the_draws_cover_every_dimension() -> None:
    """Over the default seeds, every op, index source, direction, vmap and grad is drawn."""
    programs = [draw(seed) for seed in range(FIRST, FIRST + max(COUNT, 16))]
    seen = {(op, where) for p in programs for op, where in p.ops}
    assert {op for op, _ in seen} == set(OPS) and {w for _, w in seen} == {"counter", "i", "data"}
    for flag in ("reverse", "carried", "vmapped", "grad"):
        assert {getattr(p, flag) for p in programs} == {False, True}, flag
