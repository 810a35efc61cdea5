"""Design regression: loops over a TensorArray stay linear in the number of steps.

Not a timing test. We compile the gradient of an RNN loop whose outputs are written to (W1) or
whose inputs are read from (W2) a ``jta.TensorArray`` inside ``lax.scan``, and inspect XLA's
*optimized* HLO (``jax.jit(f).lower(...).compile().as_text()``): no instruction that runs once
per loop iteration may copy, rebuild or reduce a whole ``[T, ...]`` buffer. Such an instruction
makes every step O(T), so the loop costs O(T^2) -- the classic failure of a buffer carried
through ``lax.scan`` and written with ``dynamic_update_slice``, whose transpose makes XLA copy the
whole cotangent buffer in every backward step.

The detector (:func:`whole_buffer_ops`) is itself tested: it must fire on that naive
``dynamic_update_slice`` carried buffer and stay quiet on plain ``lax.scan``.

``T`` is a prime (37) that no other dimension of the workload (batch 16, hidden 64) equals, so
"an array whose leading dimension is T (or T + 1)" means "a whole per-step buffer".
"""

from __future__ import annotations

import dataclasses
import functools
import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax

import jta
from benchmarks.workloads import cell as _cell
from benchmarks.workloads import w1_jta, w1_native, w1_raw, w2_jta, w2_raw, w3_jta, w3_raw
from tests.helpers import xla

T, BATCH, HIDDEN = 37, 16, 64


# ----------------------------------------------------------------------------------------------
# A small parser for XLA's HLO text
# ----------------------------------------------------------------------------------------------
@dataclasses.dataclass
class Instr:
    name: str
    shape: str  # the result shape text, e.g. ``f32[37,16,64]{2,1,0}`` or a ``(...)`` tuple
    opcode: str
    operands: list[str]
    called: list[str]  # computations this instruction calls (fusion, while, conditional, ...)
    root: bool
    text: str


_HEADER = re.compile(r"^(?:ENTRY\s+)?%?([^\s(]+)\s*\(.*\)\s*->\s*.*\{\s*$")
_INSTR = re.compile(r"^\s*(ROOT\s+)?%?([^\s=]+)\s*=\s*(.*)$")
_CALLED = re.compile(r"\b(?:calls|to_apply|body|condition|true_computation|false_computation)=%?([\w.\-]+)")
_CALLED_LIST = re.compile(r"\b(?:branch_computations|called_computations)=\{([^}]*)\}")
_ARRAY = re.compile(r"\b(pred|token|[subfc]\d+|bf16|f8\w*)\[([\d,]*)\]")


def _balanced(s: str, start: int) -> int:
    """Index just past the parenthesis group that opens at ``s[start]``."""
    depth = 0
    for k in range(start, len(s)):
        depth += {"(": 1, ")": -1}.get(s[k], 0)
        if depth == 0:
            return k + 1
    raise ValueError(f"unbalanced HLO text: {s!r}")


def parse_hlo(text: str) -> dict[str, list[Instr]]:
    """``{computation name: [instructions]}`` from ``compile().as_text()``."""
    comps: dict[str, list[Instr]] = {}
    current = None
    for line in text.splitlines():
        if current is None:
            m = _HEADER.match(line)
            if m:
                current = comps.setdefault(m.group(1), [])
            continue
        if line.strip() == "}":
            current = None
            continue
        m = _INSTR.match(line)
        if not m:
            continue
        root, name, rest = bool(m.group(1)), m.group(2), m.group(3)
        end = _balanced(rest, 0) if rest.startswith("(") else rest.index(" ")
        shape, rest = rest[:end], rest[end:].strip()
        op = re.match(r"([\w\-]+)\(", rest)
        if not op:
            continue
        close = _balanced(rest, op.end() - 1)
        operands = re.findall(r"%([\w.\-]+)", rest[op.end():close - 1])
        attrs = rest[close:]
        called = _CALLED.findall(attrs)
        for group in _CALLED_LIST.findall(attrs):
            called += re.findall(r"%?([\w.\-]+)", group)
        current.append(Instr(name, shape, op.group(1), operands, called, root, line.strip()))
    return comps


def array_dims(shape: str, dtype: str | None = None) -> list[tuple[int, ...]]:
    """The dimensions of every array (of element type ``dtype``, e.g. ``"f32"``) in a shape text."""
    return [tuple(int(d) for d in dims.split(",") if d) for ty, dims in _ARRAY.findall(shape)
            if dtype is None or ty == dtype]


def _reachable(comps: dict[str, list[Instr]], roots: list[str]) -> set[str]:
    seen: set[str] = set()
    todo = list(roots)
    while todo:
        name = todo.pop()
        if name in seen or name not in comps:
            continue
        seen.add(name)
        for ins in comps[name]:
            todo.extend(ins.called)
    return seen


# Instructions that produce a whole-buffer shape without touching every element: plumbing, and
# the in-place updates XLA performs on a loop-carried buffer.
_PLUMBING = {"parameter", "get-tuple-element", "tuple", "bitcast", "constant", "while", "conditional",
             "call", "after-all", "opt-barrier"}
_IN_PLACE = {"dynamic-update-slice", "scatter"}


def _in_place_root(body: list[Instr], ins: Instr) -> bool:
    """Whether fused instruction ``ins`` updates a fusion parameter in place."""
    by_name = {i.name: i for i in body}
    if ins.opcode not in _IN_PLACE or not ins.operands:
        return False
    target = by_name.get(ins.operands[0])
    while target is not None and target.opcode == "bitcast":
        target = by_name.get(target.operands[0]) if target.operands else None
    return target is not None and target.opcode == "parameter"


def whole_buffer_ops(hlo_text: str, lengths: tuple[int, ...] = (T, T + 1), dtype: str | None = None) -> list[str]:
    """Instructions that run in every iteration of a while loop and cost O(whole buffer).

    A *whole buffer* is an array whose leading dimension is one of ``lengths``. Inside every
    computation reachable from a while loop's body or condition we report

    * ``copy``: a copy of a whole buffer (XLA's copy insertion could not update it in place);
    * ``rebuild``: a fusion or elementwise op that *produces* a whole buffer other than by an
      in-place ``dynamic-update-slice``/``scatter`` into a fusion parameter (e.g.
      ``add(buffer, dynamic-update-slice(zeros, ...))`` or a broadcast of zeros);
    * ``reduce``: a reduction whose operand is a whole buffer (e.g. ``any(flags)``).

    ``dtype`` (e.g. ``"f32"``) restricts the search to buffers of that element type.
    """
    comps = parse_hlo(hlo_text)
    loops = [c for ins in (i for body in comps.values() for i in body) if ins.opcode == "while"
             for c in ins.called]
    top_level = _reachable(comps, loops)
    fused = {c for name in top_level for ins in comps[name] if ins.opcode == "fusion" for c in ins.called}
    found = []

    def whole(shape: str) -> bool:
        return any(d and d[0] in lengths for d in array_dims(shape, dtype))

    for name in sorted(top_level - fused):
        for ins in comps[name]:
            if ins.opcode in ("copy", "copy-start") and whole(ins.shape):
                found.append(f"copy in {name}: {ins.text}")
            elif ins.opcode == "fusion":
                body = comps.get(ins.called[0], []) if ins.called else []
                roots = [i for i in body if i.root]
                outs = roots
                if roots and roots[0].opcode == "tuple":
                    by_name = {i.name: i for i in body}
                    outs = [by_name[o] for o in roots[0].operands if o in by_name]
                for out in outs:
                    if whole(out.shape) and not _in_place_root(body, out):
                        found.append(f"rebuild in {name}: {ins.text}")
                        break
                for inner in body:
                    if inner.opcode in ("reduce", "reduce-window") and any(
                            whole(i.shape) for i in body if i.name in inner.operands):
                        found.append(f"reduce in {name}: {ins.text}")
                        break
            elif ins.opcode in ("reduce", "reduce-window"):
                by_name = {i.name: i for i in comps[name]}
                if any(whole(by_name[o].shape) for o in ins.operands if o in by_name):
                    found.append(f"reduce in {name}: {ins.text}")
            elif ins.opcode not in _PLUMBING | _IN_PLACE and whole(ins.shape):
                found.append(f"rebuild in {name}: {ins.text}")
    return found


# ----------------------------------------------------------------------------------------------
# Workloads: a 64-wide tanh RNN
# ----------------------------------------------------------------------------------------------
# The benchmarked workloads (benchmarks/workloads.py, imported above), and naive variants.


def w1_naive_dus(W, xs):
    """The hand-rolled TensorArray: a carried buffer written with ``dynamic_update_slice``."""
    def step(carry, tx):
        h, buf = carry
        t, x = tx
        h = _cell(W, h, x)
        return (h, lax.dynamic_update_index_in_dim(buf, h, t, 0)), None
    (_, buf), _ = lax.scan(step, (jnp.zeros(xs.shape[1:]), jnp.zeros_like(xs)), (jnp.arange(xs.shape[0]), xs))
    return buf


def w2_naive_dus(W, xs):
    """Inputs in a carried buffer that each step reads and then clears with ``dynamic_update_slice``."""
    def step(carry, t):
        h, buf = carry
        x = lax.dynamic_index_in_dim(buf, t, 0, keepdims=False)
        buf = lax.dynamic_update_index_in_dim(buf, jnp.zeros_like(x), t, 0)
        return (_cell(W, h, x), buf), None
    (h, _), _ = lax.scan(step, (jnp.zeros(xs.shape[1:]), xs), jnp.arange(xs.shape[0]))
    return h


def w2_jta_carried(W, xs, checks=True):
    """The array carried through the scan (as a ``while_loop`` user would)."""
    ta = jta.TensorArray(jnp.float32, size=xs.shape[0], element_shape=xs.shape[1:], checks=checks).unstack(xs)

    def step(carry, t):
        h, ta = carry
        return (_cell(W, h, ta.read(t)), ta), None
    return lax.scan(step, (jnp.zeros(xs.shape[1:]), ta), jnp.arange(xs.shape[0]))[0][0]


def _inputs():
    kw, kx = jax.random.split(jax.random.PRNGKey(0))
    W = jax.random.normal(kw, (HIDDEN, HIDDEN)) / np.sqrt(HIDDEN)
    xs = jax.random.normal(kx, (T, BATCH, HIDDEN))
    return W, xs


def _grad(f):
    return jax.grad(lambda W, xs: jnp.sum(f(W, xs) ** 2), argnums=(0, 1))


@functools.cache
def compiled_hlo(f, grad=True) -> str:
    return xla.optimized_hlo(jax.jit(_grad(f) if grad else f).lower(*_inputs()))


def _fmt(found: list[str]) -> str:
    return "\n".join(s[:400] for s in found)


# ----------------------------------------------------------------------------------------------
# The detector itself
# ----------------------------------------------------------------------------------------------
def test_detector_fires_on_naive_dynamic_update_slice_buffer():
    found = whole_buffer_ops(compiled_hlo(w1_naive_dus))
    assert any(f.startswith("copy") for f in found), _fmt(found)


def test_detector_fires_on_naive_read_then_clear_buffer():
    assert whole_buffer_ops(compiled_hlo(w2_naive_dus))


def test_detector_fires_on_a_per_step_reduction():
    def f(W, xs):  # a loop that reduces a whole carried buffer every step
        def step(carry, t):
            h, buf = carry
            h = _cell(W, h, xs[t]) * jnp.any(buf > 1e9)
            return (h, buf.at[t].add(h)), None
        return lax.scan(step, (jnp.zeros(xs.shape[1:]), xs), jnp.arange(T))[0][0]
    found = whole_buffer_ops(compiled_hlo(f, grad=False))
    assert any(f.startswith("reduce") for f in found), _fmt(found)


def test_detector_is_quiet_on_plain_scan():
    assert whole_buffer_ops(compiled_hlo(w1_native)) == []


def test_parser_sees_the_loops():
    comps = parse_hlo(compiled_hlo(w1_jta))
    whiles = [i for body in comps.values() for i in body if i.opcode == "while"]
    assert len(whiles) >= 2  # the forward and the transposed scan
    assert all(c in comps for w in whiles for c in w.called)


# ----------------------------------------------------------------------------------------------
# jta: gradients through written (W1) and read (W2) arrays
# ----------------------------------------------------------------------------------------------
CASES = {
    "W1 TensorArray": w1_jta, "W1 raw ops": w1_raw,
    "W2 TensorArray": w2_jta, "W2 TensorArray carried": w2_jta_carried, "W2 raw ops": w2_raw,
}


@pytest.mark.rotate("checks")
@pytest.mark.parametrize("checks", [True, False], ids=["checks", "no-checks"])
@pytest.mark.parametrize("case", list(CASES))
@pytest.mark.parametrize("grad", [True, False], ids=["grad", "forward"])
def test_no_whole_buffer_work_per_step(case, checks, grad):
    f = functools.partial(CASES[case], checks=checks)
    found = whole_buffer_ops(compiled_hlo(f, grad))
    assert found == [], f"{case}: per-step whole-buffer work in the loop:\n{_fmt(found)}"


# ----------------------------------------------------------------------------------------------
# W3: read-after-write (each step reads the slot the previous step wrote; the array is carried)
# ----------------------------------------------------------------------------------------------
def w3_naive_add(W, xs):
    """A carried buffer written with a scatter-add (jta's write) and read with a dynamic slice."""
    def step(buf, tx):
        t, x = tx
        return buf.at[t].add(_cell(W, lax.dynamic_index_in_dim(buf, t - 1, 0, keepdims=False), x)), None
    return lax.scan(step, jnp.zeros((xs.shape[0] + 1, *xs.shape[1:])), (jnp.arange(1, xs.shape[0] + 1), xs))[0]


def test_detector_fires_on_read_after_write_gradient():
    """Plain JAX: the residual store of the value read re-reads the buffer after the in-place
    write could happen, so XLA:CPU copies the buffer every forward step of the gradient."""
    found = whole_buffer_ops(compiled_hlo(w3_naive_add), dtype="f32")
    assert any(f.startswith("copy") for f in found), _fmt(found)


@pytest.mark.parametrize("case", ["W3 TensorArray no-checks", "W3 raw ops"])
def test_read_after_write_gradient_is_linear(case):
    f = {"W3 TensorArray no-checks": functools.partial(w3_jta, checks=False), "W3 raw ops": w3_raw}[case]
    found = whole_buffer_ops(compiled_hlo(f))
    assert found == [], f"{case}: per-step whole-buffer work in the loop:\n{_fmt(found)}"


def test_read_after_write_gradient_never_copies_the_data_buffer():
    found = whole_buffer_ops(compiled_hlo(w3_jta), dtype="f32")
    assert found == [], _fmt(found)


@pytest.mark.rotate("checkify")
@pytest.mark.parametrize("grad", [True, False], ids=["grad", "forward"])
@pytest.mark.parametrize("checkify", [False, True], ids=["jit", "checkify"])
@pytest.mark.parametrize("w3", [w3_jta, w3_raw], ids=["TensorArray", "raw ops"])
def test_read_after_write_with_checks_never_copies_flags(grad, checkify, w3):
    """A read's check used to slice flags[i] in a fusion that nothing ordered before the next
    write's in-place flags update, so XLA:CPU copied the int32 flags (T entries) every step
    (O(T^2)); a read now checks the array's record only, and a raw read records a read after
    clear at once, from the bits it reads back after marking the slot."""
    f = _grad(w3) if grad else w3
    found = whole_buffer_ops(xla.optimized_hlo(jax.jit(jta.checkify(f) if checkify else f).lower(*_inputs())))
    assert found == [], _fmt(found)


def test_gradients_match_plain_scan():
    W, xs = _inputs()
    ref = _grad(w1_native)(W, xs)
    for f in (w1_jta, w1_raw):
        got = jax.jit(_grad(f))(W, xs)
        for a, b in zip(got, ref, strict=True):
            np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("checks", [False, True, "checkify"])
def test_read_after_write_gradient_is_linear_unbatched(checks):
    """With unbatched rows ([T, 64]) XLA:CPU used to fuse the slice of the cotangent row (the
    transpose of a write) into three consumers of the backward step and copy the whole
    f32[T+1, 64] cotangent buffer in every backward step (O(T^2)); the row is now read once, by
    an opaque reader (``jta._core.buffer.read_row_opaque``, the transpose of ``add_row_p``)."""
    kw, kx = jax.random.split(jax.random.PRNGKey(0))
    W, xs = jax.random.normal(kw, (HIDDEN, HIDDEN)) / 8, jax.random.normal(kx, (T, HIDDEN))
    f = jax.grad(lambda W, xs: jnp.sum(w3_jta(W, xs, checks=checks is not False) ** 2), argnums=(0, 1))
    f = jta.checkify(f) if checks == "checkify" else f
    found = whole_buffer_ops(xla.optimized_hlo(jax.jit(f).lower(W, xs)), dtype="f32")
    assert found == [], _fmt(found)


@pytest.mark.parametrize("fill", ["write", "unstack", "scatter"])
def test_an_unknown_element_shape_costs_nothing_per_slot(fill):
    """The first write into an array without ``element_shape`` fixes its shape and turns its
    slots into one buffer: the program that does so has the same size whatever the array's size
    (it stacked one operand per slot, and a size-4000 array took 20 s to compile)."""
    def program(size):
        ta = jta.TensorArray(jnp.float32, size=size)
        if fill == "write":
            ta = ta.write(1, jnp.ones(3))
        elif fill == "unstack":
            ta = ta.unstack(jnp.ones((size, 3)))
        else:
            ta = ta.scatter(np.array([0, 2]), jnp.ones((2, 3)))
        return ta.stack()

    def operands(size):
        return sum(len(eqn.invars) for eqn in jax.make_jaxpr(lambda: program(size))().jaxpr.eqns)

    sizes = [operands(size) for size in (8, 4000)]
    assert sizes[0] == sizes[1], sizes
    assert jax.make_jaxpr(lambda: program(4000))().out_avals[0].shape == (4000, 3)
