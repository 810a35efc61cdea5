"""Generated loop programs, each written twice: TensorFlow 2 eager and ``jta.while_loop``.

A program is a :class:`Program`: a :class:`Shape` (the static structure: which loop, the state
width, ``maximum_iterations``, the output array's capacity; what a jitted function is compiled
for) and its data (weights, initial state, a threshold or a step count: the arguments of that
jitted function). :func:`tf_run` runs it with ``tf.while_loop`` and ``tf.TensorArray`` eagerly
under a ``tf.GradientTape``; :func:`jta_program` is the same program on ``jta.while_loop`` and
``jta.TensorArray`` as a function of its data, for ``jax.jit``, ``jax.grad`` and ``jax.vmap``.

The kinds of loop (:data:`KINDS`):

* ``rnn``: ``h = tanh(W h + xs[i] + b)`` while ``sum(h * h) > thr``, ``xs`` read from an input
  array that the body closes over, ``h`` written to a growing array every step;
* ``grow``: ``x = a * x + c * sin(x)`` while ``i < n`` (``n`` an int32 argument), two growing
  arrays written every step (``x`` and ``sum(x * x)``, the second at a capacity of exactly
  ``maximum_iterations``); with ``fori``, the jta side is ``jta.fori_loop(0, n, ...)``;
* ``raw``: read after write: ``h`` is written at ``i``, then ``read(max(i - lag, 0))`` feeds the
  step (``h = tanh(W h + c * r + b)``); the array is growing, or ``fixed`` at ``maximum_iterations``;
* ``nested``: the ``rnn`` exit around an inner loop of ``ms[i]`` steps ``g = tanh(V g + h)``
  (its own ``maximum_iterations``; its condition closes over ``ms[i]``, or carries it), every
  inner step written to one growing array.

Loss, both sides: ``sum(values * wout) + sum(h * v)`` over each output array (TF: its stack and
``wout[:rows]``; jta: ``stack_padded()``, whose rows past the size are zeros, so the same sum works
with a traced size), differentiated in every float argument.

Data-dependent exits are made robust before they are compared: :func:`generate` runs the TF loop
once with the exit switched off (``thr = -1``) and records the exit statistic ``sum(h * h)`` at
every test, then picks ``thr`` so that the wanted step count results with every tested statistic at
least :data:`MARGIN` (relative) away from ``thr``; float32 rounding differences between TF's and
XLA's kernels (about 1e-7) cannot change the step count.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Optional

import jax
import jax.numpy as jnp
import numpy as np

import jta

KINDS = ("rnn", "grow", "raw", "nested")
# The test's families (tests/test_while_loop_tf.py): the first four are one kind each; zero_trip,
# bound and batch take the kinds in turn.
FAMILIES = ("exit", "grow", "read_after_write", "nested", "zero_trip", "bound", "batch")
MARGIN = 1e-3  # relative distance of every tested exit statistic from the threshold
# The per-member arguments of a batch (``jax.vmap`` axis 0); the others are shared.
MEMBER_KEYS = {"rnn": ("h0", "xs", "thr"), "grow": ("x0", "n"), "raw": ("h0", "thr"), "nested": ("h0", "ms", "thr")}
INT_KEYS = ("n", "ms")  # int32 arguments: not differentiated
WEIGHTS = ("wout", "wout2")  # the loss's weights of the first and second output array
STATE_KEY = {"rnn": "h0", "grow": "x0", "raw": "h0", "nested": "h0"}  # the initial state


@dataclasses.dataclass(frozen=True)
class Shape:
    """The static structure of a program (one compilation per shape)."""
    kind: str
    d: int = 2  # width of the state
    bound: int = 4  # maximum_iterations (of the outer loop)
    capacity: int = 6  # of the (first) output array; >= every size it can reach
    inner: int = 0  # nested: the inner loop's maximum_iterations
    lag: int = 0  # raw: the step reads back the element written lag steps earlier
    fixed: bool = False  # raw: a fixed-size output array (size = bound) instead of a growing one
    fori: bool = False  # grow: jta.fori_loop(0, n, ...) instead of jta.while_loop
    # nested: the inner condition closes over the outer step's m = ms[i], an integer of the outer
    # body's trace (else m rides in the inner carry)
    closure: bool = False


@dataclasses.dataclass
class Program:
    """One generated program: what it is, the steps it must run, its data (batch: per member)."""
    family: str
    index: int
    shape: Shape
    trips: tuple[int, ...]  # the planned step count of each member (one member unless a batch)
    data: tuple[dict[str, np.ndarray], ...]  # each member's full argument dict (shared ones equal)
    notes: tuple[str, ...] = ()

    @property
    def batched(self) -> bool:
        return self.family == "batch"

    def __str__(self) -> str:
        lines = [f"{self.family}[{self.index}]: {self.shape}"]
        for m, (data, trips) in enumerate(zip(self.data, self.trips, strict=True)):
            note = f" ({self.notes[m]})" if self.notes and self.notes[m] else ""
            lines.append(f"  member {m}: {trips} steps{note}")
            keys = data if m == 0 else MEMBER_KEYS[self.shape.kind]
            for k in keys:
                text = np.array2string(np.asarray(data[k]), precision=9, separator=", ", max_line_width=10**6)
                lines.append(f"    {k} = {text}")
        return "\n".join(lines)


# -- generation ---------------------------------------------------------------------------------

POOL = 6  # shapes per kind in the long runs: programs share them (and their compilations)


def pick_shape(kind: str, rng: np.random.Generator, vary: bool, min_bound: int = 0) -> Shape:
    """One fixed shape per kind (few compilations), or one of POOL random shapes of the kind
    (``vary``, the long runs): widths 1-3, bounds ``min_bound``-5 (0: the loop never runs),
    capacities with slack or without, lags 0-2, fixed-size arrays, ``fori_loop``."""
    if not vary:
        return {"rnn": Shape("rnn"), "grow": Shape("grow", fori=True), "raw": Shape("raw", lag=1),
                "nested": Shape("nested", bound=3, inner=2, capacity=6, closure=True)}[kind]
    r = np.random.default_rng([KINDS.index(kind), min_bound, int(rng.integers(0, POOL))])
    d, bound = int(r.integers(1, 4)), int(r.integers(min_bound, 6))
    if kind == "nested":
        inner = int(r.integers(1, 4))
        return Shape(kind, d=d, bound=bound, inner=inner, capacity=bound * inner + int(r.integers(0, 2)),
                     closure=bool(r.integers(0, 2)))
    fixed = kind == "raw" and bool(r.integers(0, 2))
    return Shape(kind, d=d, bound=bound, capacity=bound if fixed else bound + int(r.integers(0, 3)),
                 lag=int(r.integers(0, 3)) if kind == "raw" else 0, fixed=fixed,
                 fori=kind == "grow" and bool(r.integers(0, 2)))


def _f32(rng: np.random.Generator, *shape: int, scale: float = 1.0) -> np.ndarray:
    return (scale * rng.standard_normal(shape)).astype(np.float32)


def _contraction(rng: np.random.Generator, d: int) -> np.ndarray:
    """A d x d matrix of spectral norm 0.5 to 0.95: the state's norm mostly shrinks, so most
    step counts are reachable by some threshold."""
    w = rng.standard_normal((d, d))
    return (w * rng.uniform(0.5, 0.95) / np.linalg.norm(w, 2)).astype(np.float32)


def random_data(shape: Shape, rng: np.random.Generator) -> dict[str, np.ndarray]:
    """Every argument of a program of ``shape`` (``thr`` still -1: the exit is chosen later)."""
    d, cap, thr = shape.d, shape.capacity, np.float32(-1.0)
    out = {"wout": _f32(rng, cap, d), "v": _f32(rng, d)}
    if shape.kind == "rnn":
        out.update(W=_contraction(rng, d), b=_f32(rng, d, scale=0.1), xs=_f32(rng, shape.bound, d, scale=0.1),
                   h0=_f32(rng, d, scale=1.5), thr=thr)
    elif shape.kind == "grow":
        out.update(a=rng.uniform(0.3, 1.1, d).astype(np.float32), c=_f32(rng, d, scale=0.5), x0=_f32(rng, d),
                   n=np.int32(0), wout2=_f32(rng, shape.bound))
    elif shape.kind == "raw":
        out.update(W=_contraction(rng, d), b=_f32(rng, d, scale=0.1), c=_f32(rng, d, scale=0.3),
                   h0=_f32(rng, d, scale=1.5), thr=thr)
    else:
        out.update(W=_contraction(rng, d), V=_contraction(rng, d), b=_f32(rng, d, scale=0.1),
                   h0=_f32(rng, d, scale=1.5), thr=thr,
                   # one inner count per outer step (at least one: the body indexes ms even where
                   # maximum_iterations=0 runs it never, and JAX traces it)
                   ms=rng.integers(0, shape.inner + 2, max(shape.bound, 1)).astype(np.int32))
    return out


def exit_threshold(stats: list[float], bound: int, want: str, rng: np.random.Generator
                   ) -> Optional[tuple[float, int, str]]:
    """A threshold for ``sum(h * h) > thr`` giving ``want`` steps, with every tested statistic at
    least MARGIN away from it: ``(thr, steps, note)``, or None where the statistics allow none.

    ``stats[k]`` is the statistic tested before step ``k + 1`` (``k = 0..bound``). ``want``:
    ``"zero"`` (false at once), ``"short"`` (stops before the bound), ``"bound_true"`` (the bound
    stops it, the condition still true), ``"bound_false"`` (the condition turns false exactly at
    the bound: the same step count either way).
    """
    s = np.asarray(stats, np.float64)

    def apart(thr: float, tested: np.ndarray) -> bool:
        return bool(np.all(np.abs(tested - thr) > MARGIN * (1.0 + np.abs(tested))))

    if want == "zero":
        thr = s[0] + 0.25 * (1.0 + s[0])
        return thr, 0, "false at once"
    if want == "bound_true":
        thr = 0.5 * float(np.min(s)) - 0.01
        return (thr, bound, "bound reached, condition still true") if apart(thr, s) else None
    targets = [bound] if want == "bound_false" and bound > 0 else list(rng.permutation(np.arange(1, bound)))
    for t in targets:
        lo, hi = s[t], float(np.min(s[:t]))  # tested true before step t, false at step t
        thr = 0.5 * (lo + hi)
        if lo < hi and apart(thr, s[:t + 1]):
            note = "condition false exactly at the bound" if t == bound else "exit before the bound"
            return thr, int(t), note
    return None


def generate(family: str, index: int, seed: int, vary: bool) -> Program:
    """Program ``index`` of ``family`` (see tests/test_while_loop_tf.py for the families)."""
    rng = np.random.default_rng([seed, FAMILIES.index(family), index])
    # zero_trip, bound and batch take the kinds in turn (the default run's batches are all nested:
    # batches are the slowest to compile)
    cycle = ("nested",) if family == "batch" and not vary else KINDS
    kind = {"exit": "rnn", "grow": "grow", "read_after_write": "raw", "nested": "nested"}.get(
        family, cycle[index % len(cycle)])
    members = 3 if family == "batch" else 1
    shape = pick_shape(kind, rng, vary, min_bound=2 if family == "batch" else 0)  # a batch: 3 step counts
    for attempt in range(200):  # draw data until the wanted exits are robust
        datas, trips, notes = [], [], []
        shared = random_data(shape, rng)
        for m in range(members):
            data = dict(shared, **{k: v for k, v in random_data(shape, rng).items() if k in MEMBER_KEYS[kind]})
            want = _wanted(family, m, index, shape.bound, rng, cycle=attempt < 100)
            got = _choose_exit(shape, data, want, rng)
            if got is None:
                break
            trips.append(got[0])
            notes.append(got[1])
            datas.append(data)
        else:
            if family != "batch" or len(set(trips)) > 1:  # a batch's members run different step counts
                return Program(family, index, shape, tuple(trips), tuple(datas), tuple(notes))
    raise AssertionError(f"no robust exit for {family}[{index}] after 200 draws")


def _wanted(family: str, member: int, index: int, bound: int, rng: np.random.Generator, cycle: bool) -> str:
    """The exit wanted: by family and index (``cycle``: every kind of exit in turn; once the
    data for it has been hard to find, any)."""
    if family == "zero_trip":
        return "zero"
    if family == "bound":
        return ("bound_true", "bound_false", "short")[index % 3] if bound > 1 else "bound_true"
    if family == "batch":
        return ("zero", "short", "bound_true")[(member + index) % 3]
    wants = ["short", "bound_true", "bound_false", "zero", "short"]
    return wants[index % len(wants)] if cycle else str(rng.choice(wants))


def _choose_exit(shape: Shape, data: dict[str, np.ndarray], want: str, rng: np.random.Generator
                 ) -> Optional[tuple[int, str]]:
    """Set ``data``'s exit (``thr`` or ``n``) for ``want``; returns ``(steps, note)`` or None."""
    if shape.kind == "grow":  # a counter: exact
        n = {"zero": int(rng.integers(-1, 1)), "bound_true": shape.bound + int(rng.integers(1, 3)),
             "bound_false": shape.bound, "short": int(rng.integers(1, max(shape.bound, 2)))}[want]
        data["n"] = np.int32(n)
        steps = max(0, min(n, shape.bound))
        return steps, f"n = {n}" + (", the bound stops it" if n > shape.bound else "")
    stats: list[float] = []
    tf_run(shape, dict(data, thr=np.float32(-1.0)), probe=stats)
    got = exit_threshold(stats, shape.bound, want, rng)
    if got is None:
        return None
    data["thr"] = np.float32(got[0])
    return got[1], got[2]


# -- TensorFlow ---------------------------------------------------------------------------------

def tf_run(shape: Shape, data: dict[str, np.ndarray], probe: Optional[list[float]] = None) -> dict[str, Any]:
    """Run the program eagerly in TF: ``{"trips", "h", "stacks", "loss", "grads"}`` as numpy
    (grads: every float argument; an unconnected one is zeros). ``probe`` collects the exit
    statistic at every test of the exit condition."""
    import tensorflow as tf

    p = {k: tf.constant(v) for k, v in data.items()}
    floats = sorted(k for k in p if k not in INT_KEYS)
    with tf.GradientTape() as tape:
        tape.watch([p[k] for k in floats])
        trips, h, stacks = _TF_KINDS[shape.kind](tf, shape, p, probe)
        loss = tf.reduce_sum(h * p["v"])
        for stack, w in zip(stacks, WEIGHTS[:len(stacks)], strict=True):
            loss += tf.reduce_sum(stack * p[w][:stack.shape[0]])
    grads = tape.gradient(loss, [p[k] for k in floats], unconnected_gradients=tf.UnconnectedGradients.ZERO)
    return {"trips": int(trips), "h": h.numpy(), "stacks": [s.numpy() for s in stacks], "loss": loss.numpy(),
            "grads": {k: g.numpy() for k, g in zip(floats, grads, strict=True)}}


def _tf_exit(tf: Any, h: Any, thr: Any, probe: Optional[list[float]]) -> Any:
    stat = tf.reduce_sum(h * h)
    if probe is not None:  # eager: the loop's Python calls this once per test
        probe.append(float(stat))
    return stat > thr


def _tf_rnn(tf: Any, s: Shape, p: dict[str, Any], probe: Optional[list[float]]) -> tuple[Any, Any, list[Any]]:
    xs = tf.TensorArray(tf.float32, size=s.bound, element_shape=(s.d,)).unstack(p["xs"])
    out = tf.TensorArray(tf.float32, size=0, dynamic_size=True, element_shape=(s.d,))

    def body(i: Any, h: Any, out: Any) -> tuple[Any, Any, Any]:
        h = tf.tanh(tf.linalg.matvec(p["W"], h) + xs.read(i) + p["b"])
        return i + 1, h, out.write(i, h)

    i, h, out = tf.while_loop(lambda i, h, out: _tf_exit(tf, h, p["thr"], probe), body, (0, p["h0"], out),
                              maximum_iterations=s.bound)
    return i, h, [out.stack()]


def _tf_grow(tf: Any, s: Shape, p: dict[str, Any], probe: Optional[list[float]]) -> tuple[Any, Any, list[Any]]:
    t1 = tf.TensorArray(tf.float32, size=0, dynamic_size=True, element_shape=(s.d,))
    t2 = tf.TensorArray(tf.float32, size=0, dynamic_size=True, element_shape=())

    def body(i: Any, x: Any, t1: Any, t2: Any) -> tuple[Any, Any, Any, Any]:
        x = p["a"] * x + p["c"] * tf.sin(x)
        return i + 1, x, t1.write(i, x), t2.write(i, tf.reduce_sum(x * x))

    i, x, t1, t2 = tf.while_loop(lambda i, *_: i < p["n"], body, (0, p["x0"], t1, t2), maximum_iterations=s.bound)
    return i, x, [t1.stack(), t2.stack()]


def _tf_raw(tf: Any, s: Shape, p: dict[str, Any], probe: Optional[list[float]]) -> tuple[Any, Any, list[Any]]:
    # clear_after_read=False: with i - lag clipped at 0, element 0 is read more than once.
    out = tf.TensorArray(tf.float32, size=s.bound if s.fixed else 0, dynamic_size=not s.fixed,
                         clear_after_read=False, element_shape=(s.d,))

    def body(i: Any, h: Any, out: Any) -> tuple[Any, Any, Any]:
        out = out.write(i, h)
        r = out.read(tf.maximum(i - s.lag, 0))
        return i + 1, tf.tanh(tf.linalg.matvec(p["W"], h) + p["c"] * r + p["b"]), out

    i, h, out = tf.while_loop(lambda i, h, out: _tf_exit(tf, h, p["thr"], probe), body, (0, p["h0"], out),
                              maximum_iterations=s.bound)
    return i, h, [out.stack()]


def _tf_nested(tf: Any, s: Shape, p: dict[str, Any], probe: Optional[list[float]]) -> tuple[Any, Any, list[Any]]:
    out = tf.TensorArray(tf.float32, size=0, dynamic_size=True, element_shape=(s.d,))

    def outer(i: Any, k: Any, h: Any, out: Any) -> tuple[Any, Any, Any, Any]:
        m = tf.gather(p["ms"], i)

        def inner(j: Any, k: Any, g: Any, out: Any) -> tuple[Any, Any, Any, Any]:
            g = tf.tanh(tf.linalg.matvec(p["V"], g) + h)
            return j + 1, k + 1, g, out.write(k, g)

        _, k, g, out = tf.while_loop(lambda j, *_: j < m, inner, (0, k, h, out), maximum_iterations=s.inner)
        return i + 1, k, tf.tanh(tf.linalg.matvec(p["W"], g) + p["b"]), out

    i, _, h, out = tf.while_loop(lambda i, k, h, out: _tf_exit(tf, h, p["thr"], probe), outer, (0, 0, p["h0"], out),
                                 maximum_iterations=s.bound)
    return i, h, [out.stack()]


_TF_KINDS = {"rnn": _tf_rnn, "grow": _tf_grow, "raw": _tf_raw, "nested": _tf_nested}


# -- jta ----------------------------------------------------------------------------------------

def split(data: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """``(float arguments, int arguments)``: the first are differentiated."""
    return ({k: v for k, v in data.items() if k not in INT_KEYS}, {k: v for k, v in data.items() if k in INT_KEYS})


def jta_program(shape: Shape):
    """``f(floats, ints) -> (loss, aux)`` on jta, aux ``{"trips", "h", "padded", "arrays"}``:
    the step count, the final state, ``stack_padded()`` of each output array (taken where the
    loss is, so inside ``jit`` with a traced size) and the arrays themselves."""
    run = _JTA_KINDS[shape.kind]

    def f(floats: dict[str, Any], ints: dict[str, Any]) -> tuple[Any, dict[str, Any]]:
        p = dict(floats, **ints)
        trips, h, arrays = run(shape, p)
        loss, padded = jnp.sum(h * p["v"]), [ta.stack_padded() for ta in arrays]
        for (values, _), w in zip(padded, WEIGHTS[:len(padded)], strict=True):
            loss = loss + jnp.sum(values * p[w])  # rows past the size are zeros: no mask needed
        return loss, {"trips": trips, "h": h, "padded": padded, "arrays": arrays}

    return f


def _exit(h: Any, thr: Any) -> Any:
    return jnp.sum(h * h) > thr


def _jta_rnn(s: Shape, p: dict[str, Any]) -> tuple[Any, Any, list[Any]]:
    xs = jta.TensorArray(jnp.float32, size=s.bound, element_shape=(s.d,)).unstack(p["xs"])
    out = jta.TensorArray(jnp.float32, size=0, dynamic_size=True, capacity=s.capacity, element_shape=(s.d,))

    def body(c: tuple[Any, Any, Any]) -> tuple[Any, Any, Any]:
        i, h, out = c
        h = jnp.tanh(p["W"] @ h + xs.read(i) + p["b"])  # xs: an array the body closes over
        return i + 1, h, out.write(i, h)

    i, h, out = jta.while_loop(lambda c: _exit(c[1], p["thr"]), body, (jnp.int32(0), p["h0"], out),
                               maximum_iterations=s.bound)
    return i, h, [out]


def _jta_grow(s: Shape, p: dict[str, Any]) -> tuple[Any, Any, list[Any]]:
    t1 = jta.TensorArray(jnp.float32, size=0, dynamic_size=True, capacity=s.capacity, element_shape=(s.d,))
    t2 = jta.TensorArray(jnp.float32, size=0, dynamic_size=True, capacity=s.bound, element_shape=())

    def step(i: Any, x: Any, t1: Any, t2: Any) -> tuple[Any, Any, Any]:
        x = p["a"] * x + p["c"] * jnp.sin(x)
        return x, t1.write(i, x), t2.write(i, jnp.sum(x * x))

    if s.fori:
        x, t1, t2 = jta.fori_loop(0, p["n"], lambda i, c: step(i, *c), (p["x0"], t1, t2), maximum_iterations=s.bound)
        return t1.size(), x, [t1, t2]
    i, x, t1, t2 = jta.while_loop(lambda c: c[0] < p["n"], lambda c: (c[0] + 1, *step(*c)),
                                  (jnp.int32(0), p["x0"], t1, t2), maximum_iterations=s.bound)
    return i, x, [t1, t2]


def _jta_raw(s: Shape, p: dict[str, Any]) -> tuple[Any, Any, list[Any]]:
    if s.fixed:
        out = jta.TensorArray(jnp.float32, size=s.bound, element_shape=(s.d,))
    else:
        out = jta.TensorArray(jnp.float32, size=0, dynamic_size=True, capacity=s.capacity, element_shape=(s.d,))

    def body(c: tuple[Any, Any, Any]) -> tuple[Any, Any, Any]:
        i, h, out = c
        out = out.write(i, h)
        r = out.read(jnp.maximum(i - s.lag, 0))
        return i + 1, jnp.tanh(p["W"] @ h + p["c"] * r + p["b"]), out

    i, h, out = jta.while_loop(lambda c: _exit(c[1], p["thr"]), body, (jnp.int32(0), p["h0"], out),
                               maximum_iterations=s.bound)
    return i, h, [out]


def _jta_nested(s: Shape, p: dict[str, Any]) -> tuple[Any, Any, list[Any]]:
    out = jta.TensorArray(jnp.float32, size=0, dynamic_size=True, capacity=s.capacity, element_shape=(s.d,))

    def outer(c: tuple[Any, Any, Any, Any]) -> tuple[Any, Any, Any, Any]:
        i, k, h, out = c
        m = p["ms"][i]

        def inner(c: tuple[Any, Any, Any, Any, Any]) -> tuple[Any, Any, Any, Any, Any]:
            j, m, k, g, out = c
            g = jnp.tanh(p["V"] @ g + h)  # h: the outer loop's state, a constant of the inner one
            return j + 1, m, k + 1, g, out.write(k, g)

        cond = (lambda c: c[0] < m) if s.closure else (lambda c: c[0] < c[1])
        _, _, k, g, out = jta.while_loop(cond, inner, (jnp.int32(0), m, k, h, out), maximum_iterations=s.inner)
        return i + 1, k, jnp.tanh(p["W"] @ g + p["b"]), out

    i, _, h, out = jta.while_loop(lambda c: _exit(c[2], p["thr"]), outer, (jnp.int32(0), jnp.int32(0), p["h0"], out),
                                  maximum_iterations=s.bound)
    return i, h, [out]


_JTA_KINDS = {"rnn": _jta_rnn, "grow": _jta_grow, "raw": _jta_raw, "nested": _jta_nested}


def member_axes(shape: Shape, tree: dict[str, Any]) -> dict[str, Optional[int]]:
    """``jax.vmap`` in_axes for a float or int argument dict: 0 for the per-member arguments."""
    return {k: (0 if k in MEMBER_KEYS[shape.kind] else None) for k in tree}


def stack_members(program: Program) -> dict[str, Any]:
    """A batch's arguments: the per-member ones stacked, the shared ones as they are."""
    keys = MEMBER_KEYS[program.shape.kind]
    first = program.data[0]
    return {k: (np.stack([d[k] for d in program.data]) if k in keys else first[k]) for k in first}


def to_jax(tree: Any) -> Any:
    return jax.tree_util.tree_map(jnp.asarray, tree)
