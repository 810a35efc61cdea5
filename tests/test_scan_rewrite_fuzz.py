"""Random differentiated loops: the scan rewrite (``jta._delivery.scan_rewrite``) against JAX's rule.

The rewrite decides while tracing which rows a scan's TensorArray writes and reads touch (the
indices' values known then, by ``known.per_step``: a counter from a constant, a scanned
``arange``, integer ops on those) and puts them in place outside the loop; a row it gets wrong is
a wrong value or gradient, silently. :func:`test_rewrite_is_jaxs_rule` generates random scans and
``fori_loop`` s that write, read, or read the previous step's row of (W3) TensorArrays at indices
derived from counters of every integer dtype (x64 ones too), from negative and extreme starts,
with wrapping strides, reversed or unrolled, into buffers wider than the index dtype counts,
with checks on or off; each is differentiated (``value_and_grad`` under ``jta.checkify``) with
the rewrite and with JAX's own rule (``jax_rules.jax_scan_rules``): the error records must be
equal, and the values too where none is recorded (up to rounding: the two are compiled apart);
``jta.checked`` must raise the eager program's first error. :data:`CLASSES` holds one loop of
each class of difference the generator found.
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax

import jta
from jta._delivery import jax_rules, scan_rewrite
from tests.helpers import budget

INTS32 = [np.int8, np.uint8, np.int16, np.uint16, np.int32, np.uint32]
INTS64 = [np.int64, np.uint64]


@dataclasses.dataclass(frozen=True)
class Loop:
    """One random loop's choices (printed when it fails)."""

    dtype: str
    size: int
    length: int
    start: int
    stride: int
    reverse: bool
    unroll: int
    source: str  # "counter", "xs", "both" (counter + scanned input), "fori"
    how: str  # the index op applied to the counter
    kind: str  # "write", "read", "chained", "both" (a write and a read of another array)
    checks: bool


def _fit(x: int, dtype) -> int:
    info = np.iinfo(dtype)
    return min(max(x, int(info.min)), int(info.max))


def draw(seed: int, x64: bool) -> Loop:
    """A random loop, its values at the edges of its dtype (where counters wrap)."""
    rng = np.random.default_rng(seed)
    ints = INTS32 + (INTS64 if x64 else [])
    dt = ints[rng.integers(len(ints))]
    info = np.iinfo(dt)
    # 300 rows: past the count of an 8-bit index (XLA clamps its updates at 299 wrapped: 43). Not
    # 130 or 200 rows: there the bound wraps negative, and the loop's own 8-bit write lands
    # outside the buffer (memory corruption, in JAX's rule as in the rewrite).
    size = int(rng.choice([1, 3, 6, 6, 8, 300]))
    start = int(rng.choice([0, 0, 1, -3, -1, int(info.max) - 2, int(info.min), int(info.max) // 2, size - 3,
                            int(info.max) - size // 2]))
    stride = int(rng.choice([1, 1, 1, 2, -1, 3, 50, int(info.max)]))
    kind = str(rng.choice(["write", "read", "chained", "both"]))
    return Loop(np.dtype(dt).name, size, int(rng.integers(1, 9)), _fit(start, dt), stride if info.min <= stride <= info.max else 1,
                bool(rng.integers(2)), int(rng.choice([1, 1, 2, 3])),
                str(rng.choice(["counter", "counter", "xs", "both", "fori"])),
                str(rng.choice(["plain", "plain", "shift", "clip", "mod", "mul", "neg", "where", "convert"])),
                kind, bool(rng.integers(3)))


def index_of(p: Loop, j):
    """The index the loop uses, from the counter's value ``j`` (in ``p.dtype``)."""
    c = lambda v: np.asarray(v).astype(p.dtype)  # noqa: E731
    if p.how == "shift":
        return j + c(2)
    if p.how == "clip":
        return jnp.clip(j, c(0), c(min(p.size, int(np.iinfo(p.dtype).max))))
    if p.how == "mod":
        return j & c(7)
    if p.how == "mul":
        return j * c(2)
    if p.how == "neg":
        return -j
    if p.how == "where":
        return jnp.where(j > c(p.size // 2), j, c(p.size - 1))
    if p.how == "convert":
        return j.astype(jnp.int32)
    return j


def written_rows(p: Loop) -> set[int]:
    """The rows the loop writes (those in range), computed eagerly, step by step, as the loop
    computes its indices."""
    step, first = np.asarray(p.stride).astype(p.dtype), jnp.asarray(np.asarray(p.start).astype(p.dtype))
    xs = (jnp.arange(p.length, dtype=p.dtype) * step + first).astype(p.dtype)
    rows, i = set(), first
    for s in range(p.length):
        if p.source == "fori":
            k = jnp.asarray(p.start % 5 - 2 + s).astype(p.dtype) * step
        else:
            t = xs[p.length - 1 - s] if p.reverse else xs[s]
            k = i if p.source == "counter" else t if p.source == "xs" else i + t
            i = i + step
        j = int(index_of(p, k))
        rows |= {j} if 0 <= j < p.size else set()
    return rows


def program(p: Loop):
    """``f(w, x)``: the loop, a float from its rows (``w`` a scalar, ``x`` ``[size]``)."""
    free = np.asarray(sorted(set(range(p.size)) - written_rows(p)), np.int32) if p.kind == "chained" else None

    def f(w, x):
        make = lambda **kw: jta.TensorArray(jnp.float32, size=p.size, element_shape=(), checks=p.checks, **kw)  # noqa: E731
        out = make(clear_after_read=False)
        if p.kind == "chained":  # (every row the loop does not write: what it reads is written)
            out = out.scatter(free, (x * 0.25)[free]) if free.size else out
        src = make().unstack(jnp.cos(x))
        first, step = jnp.asarray(np.asarray(p.start).astype(p.dtype)), np.asarray(p.stride).astype(p.dtype)

        def one(h, out, src, i):
            j = index_of(p, i)
            if p.kind in ("read", "both"):
                h = jnp.sin(h * w + src.read(j))
            if p.kind == "chained":
                h = jnp.tanh(out.read(index_of(p, i - step)) * w + h)
            if p.kind != "read":
                out = out.write(j, h * w + 1.0)
            return h, out, src

        if p.source == "fori":
            lo = p.start % 5 - 2  # (as written_rows counts)

            def body(i, c):
                return one(*c, jnp.asarray(i).astype(p.dtype) * step)
            h, out, src = lax.fori_loop(lo, lo + p.length, body, (w, out, src))
        else:
            xs = (jnp.arange(p.length, dtype=p.dtype) * step + first).astype(p.dtype) if p.source != "counter" else None

            def body(c, t):
                h, out, src, i = c
                k = i if t is None else (t if p.source == "xs" else i + t)
                return (*one(h, out, src, k), i + step), None
            (h, out, src, _), _ = lax.scan(body, (w, out, src, first), xs, length=p.length, reverse=p.reverse,
                                           unroll=p.unroll)
        rows = out.stack_padded()[0] if p.kind != "read" else jnp.zeros(())
        return jnp.sum(rows * jnp.arange(1.0, rows.size + 1).reshape(rows.shape)) + h * 3.0

    return f


def _differences(a, b) -> list[str]:
    """Where two results differ: ``leaf[position]: a / b``. Floats up to rounding: the two
    programs are compiled apart, and XLA may contract or order a step's float ops differently
    (a few ulps); a row put in the wrong place differs by far more."""
    out = []
    for k, (x, y) in enumerate(zip(jax.tree_util.tree_leaves(a), jax.tree_util.tree_leaves(b), strict=True)):
        x, y = np.atleast_1d(np.asarray(x)), np.atleast_1d(np.asarray(y))
        if x.dtype != y.dtype:
            out.append(f"leaf {k}: {x.dtype} / {y.dtype}")
            continue
        scale = float(np.max(np.abs(y), initial=1.0, where=np.isfinite(y)))
        same = np.isclose(x, y, rtol=1e-5, atol=1e-6 * scale, equal_nan=True)
        for at in np.argwhere(~same)[:3]:
            out.append(f"leaf {k}{list(at)}: {x[tuple(at)]!r} / {y[tuple(at)]!r}")
    return out


def _raised(run) -> str | None:
    try:
        run()
    except jta.errors.TensorArrayError as e:
        return f"{type(e).__name__}: {e}"
    return None


def check(p: Loop, x64: bool, applied: list, eager: bool) -> list[str]:
    """One loop differentiated with the rewrite and with JAX's rule: the differences (none when
    they agree); ``eager``: also ``jta.checked`` against the eager program's first error (op by
    op: slow)."""
    w, x = jnp.float32(0.7), jnp.linspace(-1.0, 1.0, p.size, dtype=jnp.float32)
    bad = []
    with jax.enable_x64(x64):
        f = program(p)
        grad = jax.value_and_grad(f, (0, 1))
        before = len(applied)
        try:
            new = jax.jit(jta.checkify(grad))(w, x)
        except Exception as e:  # noqa: BLE001 (a crash of the rewrite is a finding too)
            return [f"{p}: the rewrite raised {type(e).__name__}: {e}"]
        rewritten = len(applied) > before
        with jax_rules.jax_scan_rules():
            old = jax.jit(jta.checkify(grad))(w, x)
        if str(new[0]) != str(old[0]):
            bad.append(f"{p}: record {new[0]} / JAX's rule {old[0]}")
        diff = _differences(new[1], old[1]) if new[0].exception is None else []  # (an error: values unspecified)
        if diff:
            bad.append(f"{p}: rewrite / JAX's rule at {'; '.join(diff)}")
        if eager and p.checks:
            with jax.disable_jit():
                want = _raised(lambda: jta.throw(jta.checkify(f)(w, x)[0]))
            got = _raised(lambda: jta.checked(jax.jit(grad))(w, x))
            if want != got:
                bad.append(f"{p}: checked raised {got} / eager {want}")
    return [f"{b} (rewritten: {rewritten})" for b in bad]


def run_loop(seed: int, x64: bool, applied: list) -> list[str]:
    return [f"seed {seed} {b}" for b in check(draw(seed, x64), x64, applied, eager=seed % 4 == 0)]


N_LOOPS = budget.scaled(2, 1500)


@pytest.fixture
def applied(monkeypatch) -> list:
    """The scans the rewrite rewrote (appended to as it does)."""
    found: list = []
    original = scan_rewrite.rewritten

    def spy(*a, **k):
        out = original(*a, **k)
        if out is not None:
            found.append(out)
        return out

    monkeypatch.setattr(scan_rewrite, "rewritten", spy)
    return found


@pytest.mark.long
def test_rewrite_is_jaxs_rule(applied):
    """Random differentiated loops: the rewrite's values and errors are JAX's rule's."""
    bad = []
    for seed in range(N_LOOPS):
        bad += run_loop(seed, x64=seed % 3 == 2, applied=applied)
    assert not bad, "\n".join(bad[:20])
    assert applied  # (the rewrite ran: the test tests something)


# Each class of wrong answer found, as one loop (``x64``, the loop): the generator's, and one built
# for a path random starts rarely reach (a counter past 2**53).
CLASSES = {
    # A counter times a constant (``fori_loop``'s ``i * stride``): the evaluator's ``mul`` did not
    # take lax's ``out_dtype`` parameter, and differentiating the loop raised a TypeError.
    "an index made by a multiplication": (False, Loop("int32", 6, 3, 0, 1, False, 1, "counter", "mul", "write", True)),
    # A uint64 counter from 2**64 - 2**32 + 1 (int32 rows 1, 2, 3, 4): counted in float64, every
    # step's index was one value, and the chain (step t reads the row step t - 1 wrote) was moved
    # out at row 0: another forward value and gradient, with no error recorded.
    "a uint64 counter near 2**64": (True, Loop("uint64", 6, 4, 2**64 - 2**32 + 1, 1, True, 1, "counter", "convert",
                                               "chained", True)),
    # An 8-bit index past row 43 of 300: XLA clamps it in its dtype, where 299 wraps to 43, but
    # not in every kernel (an update sets row 43, an add fused with it updates row 155), so the
    # row depends on how XLA compiles the loop: the rewritten loop's was not JAX's rule's.
    "a uint8 index into 300 rows": (False, Loop("uint8", 300, 3, 105, 50, False, 1, "counter", "where", "both", False)),
}


@pytest.mark.parametrize("name", CLASSES)
def test_found_class(name, applied):
    """Each class found: the rewrite is JAX's rule there."""
    x64, p = CLASSES[name]
    bad = check(p, x64, applied, eager=False)
    assert not bad, "\n".join(bad)
