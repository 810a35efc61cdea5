"""Seeded random TF1 programs (control flow v1) with TensorFlow's results, for fuzzing ``jta.import_graph_def``.

:func:`generate` builds one small program per seed in a fresh mode-K graph (:func:`tests.helpers.tfgraph.k_graph`):
one to three *stages* applied in turn to a fed ``x`` of shape ``[T, B, F]`` (``T <= 6``, ``B <= 3``, ``F <= 4``),
each one of the constructs TF1 users wrote: ``tf.map_fn`` (tuples, ``fn_output_signature``, over more than 256
elements), ``tf.scan`` (reverse, tuple state), ``tf.foldl``/``tf.foldr``, hand-written ``tf.while_loop`` over
TensorArrays (fixed, fed and value-dependent trip counts, ``maximum_iterations``, ``back_prop``,
``parallel_iterations``; unstack/scatter/split/read/write/size/stack/gather/concat, ``dynamic_size``,
``clear_after_read``, element shapes known or not), ``tf.cond``/``tf.case`` on run-time predicates around
and inside loops, loops nested in loop bodies (a stage applied to each element), ``dynamic_rnn``,
``bidirectional_dynamic_rnn``, ``raw_rnn``, ``static_rnn`` and an encoder-decoder (duck-typed cells from
:mod:`tests.helpers.graph_corpus`, or TF1's ``tf.compat.v1.nn.rnn_cell`` cells where ``tf_keras`` provides
them), a greedy decoder (argmax + ``embedding_lookup``), and ``parallel_for`` jacobians. Then
``loss = sum(outputs * fixed weights)``, ``tf.gradients(loss, float inputs)``, freezing and one
``Session.run``.

Each :class:`Program` records the constructs it used (:attr:`Program.tags`) so a test can tell a documented
refusal from a bug, and a one-line :attr:`Program.description`. TensorFlow is imported inside the builders
only. ``python -m tests.helpers.tf1_programs SEED...`` prints the programs of some seeds.

```python
>>> from tests.helpers.tf1_programs import generate
>>> p = generate(24)
>>> p.outputs[0], len(p.expected) == len(p.outputs)
('loss:0', True)

```
"""

from __future__ import annotations

import dataclasses
import functools
import math
import sys
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from tests.helpers import graph_corpus
from tests.helpers.tfgraph import k_graph

MAX_DEPTH = 2  # loops nested in loop bodies at most this deep


@dataclasses.dataclass(frozen=True)
class Program:
    """One frozen TF1 program, its feeds, and what ``Session.run`` returned for them.

    ``outputs`` is ``["loss:0", forward..., side..., gradients...]``: the loss (a weighted sum of the
    forward outputs), the forward outputs, side outputs kept out of the loss (int tokens, jacobians,
    which TF cannot differentiate again), then ``d loss / d inputs[grad_inputs[k]]``."""

    seed: int
    description: str
    tags: frozenset[str]
    graph_def: Any
    inputs: list[str]
    outputs: list[str]
    n_forward: int  # the loss and the forward outputs: outputs[:n_forward]
    n_side: int  # outputs[n_forward:n_forward + n_side]
    feeds: list[np.ndarray]
    expected: list[np.ndarray]
    grad_inputs: list[int]
    import_kwargs: dict[str, Any]  # what a user passes to import_graph_def for this program
    rtol: float

    @property
    def grads(self) -> list[np.ndarray]:
        return self.expected[self.n_forward + self.n_side:]


@functools.cache
def legacy_cells_available() -> bool:
    """Whether ``tf.compat.v1.nn.rnn_cell.LSTMCell`` exists (``tf_keras`` installed and ``TF_USE_LEGACY_KERAS=1``
    set before TensorFlow was imported)."""
    try:
        import tensorflow as tf

        return tf.compat.v1.nn.rnn_cell.LSTMCell is not None
    except (ImportError, AttributeError):
        return False


class _Builder:
    """What one program is made of while it is built: the random stream, placeholders, outputs, tags."""

    def __init__(self, seed: int, legacy: bool):
        self.seed = seed
        self.rng = np.random.default_rng(seed)
        self.legacy = legacy
        self.tags: list[str] = []
        self.steps: list[str] = []
        self.placeholders: list[Any] = []
        self.feeds: list[np.ndarray] = []
        self.extras: list[Any] = []  # forward outputs besides the last stage's (final states)
        self.side: list[Any] = []
        self.kwargs: dict[str, Any] = {}
        self.count = 0
        self.in_branch = 0  # > 0 while a cond branch is built: nothing made there can be fetched

    # -- randomness ---------------------------------------------------------------------------------
    def coin(self, p: float = 0.5) -> bool:
        return bool(self.rng.random() < p)

    def pick(self, options: Sequence[Any], weights: Sequence[float] | None = None) -> Any:
        p = None if weights is None else np.asarray(weights, float) / np.sum(weights)
        return options[int(self.rng.choice(len(options), p=p))]

    def tag(self, *names: str) -> None:
        self.tags.extend(names)

    def name(self, stem: str) -> str:
        self.count += 1
        return f"{stem}{self.count}"

    # -- tensors ------------------------------------------------------------------------------------
    def weight(self, shape: Sequence[int], scale: float = 1.0) -> Any:
        import tensorflow as tf

        w = self.rng.standard_normal(shape) * scale / math.sqrt(max(shape[0], 1))
        return tf.constant(w.astype(np.float32))

    def placeholder(self, dtype: Any, shape: Sequence[int | None], value: Any, stem: str) -> Any:
        import tensorflow as tf

        # Fed tensors live outside every loop and cond, even when a nested stage asks for one: TF cannot
        # differentiate a loop that reads a placeholder made in its own frame.
        graph = tf.compat.v1.get_default_graph()
        context = graph._get_control_flow_context()
        graph._set_control_flow_context(None)
        try:
            with tf.control_dependencies(None), tf.compat.v1.name_scope(None):
                p = tf.compat.v1.placeholder(dtype, shape, name=self.name(stem))
        finally:
            graph._set_control_flow_context(context)
        self.placeholders.append(p)
        self.feeds.append(np.asarray(value))
        return p

    def fed_count(self, bound: int) -> Any:
        """A fed int32 scalar in ``[1, bound]``: a trip count only known at run time."""
        import tensorflow as tf

        return self.placeholder(tf.int32, [], np.int32(self.rng.integers(1, bound + 1)), "n")

    def predicate(self, value: Any) -> Any:
        """A predicate known at run time only: a fed bool, a fed float's sign, or the sign of ``value``'s sum."""
        import tensorflow as tf

        kind = self.pick(["fed_bool", "fed_float", "data"])
        self.tag(f"pred_{kind}")
        if kind == "fed_bool":
            return self.placeholder(tf.bool, [], np.bool_(self.coin()), "flag")
        if kind == "fed_float":
            return self.placeholder(tf.float32, [], np.float32(self.rng.standard_normal()), "p") > 0
        return tf.reduce_sum(value) > 0.05

    def pointwise(self, v: Any) -> Any:
        """A differentiable elementwise map (the leaf of every loop body)."""
        import tensorflow as tf

        n = v.shape[-1]
        kind = self.pick(["tanh_affine", "sin_mul", "sigmoid", "dense"])
        if kind == "tanh_affine":
            return tf.tanh(v * self.weight([n]) + self.weight([n], 0.3))
        if kind == "sin_mul":
            return tf.sin(v) * v
        if kind == "sigmoid":
            return 2.0 * tf.sigmoid(v) - 1.0
        return tf.tanh(tf.tensordot(v, self.weight([n, n]), [[v.shape.rank - 1], [0]]))

    def length(self, x: Any) -> Any:
        """``x``'s leading dimension: a Python int when static, else ``tf.shape(x)[0]``."""
        import tensorflow as tf

        n = x.shape[0]
        return int(n) if n is not None else tf.shape(x)[0]


# -- stages: x of shape [N, *rest] (rank >= 2) to y, leading axis iterated -------------------------------
# A stage returns (y, extras): extras are more forward outputs, which only the top level may keep (a tensor
# made in a cond branch or a loop body cannot be fetched outside it).

def _inner(b: _Builder, v: Any, depth: int) -> Any:
    """The function applied to one element: pointwise, or a whole stage (a nested loop) when ``v`` has rank >= 2."""
    if v.shape.rank >= 2 and depth < MAX_DEPTH and b.coin(0.35):
        stage = b.pick([_map_fn, _scan, _fold, _while], [1, 1, 1, 2])
        b.tag("nested")
        b.steps.append("{")
        y, _ = stage(b, v, depth + 1)
        b.steps.append("}")
        return y
    return b.pointwise(v)


def _map_fn(b: _Builder, x: Any, depth: int) -> tuple[Any, list[Any]]:
    import tensorflow as tf

    variant = b.pick(["plain", "tuple", "signature", "cond", "v1_dtype"])
    b.tag("map_fn", f"map_fn_{variant}")
    b.steps.append(f"map_fn[{variant}]")
    rest = x.shape[1:]
    parallel = int(b.pick([1, 4, 10]))
    if variant == "plain":
        y = tf.map_fn(lambda e: _inner(b, e, depth), x, parallel_iterations=parallel)
    elif variant == "tuple":
        a, c = tf.map_fn(lambda t: (_inner(b, t[0], depth), t[0] * tf.tanh(t[1])), (x, 0.5 * x),
                         fn_output_signature=(tf.float32, tf.float32), parallel_iterations=parallel)
        y = a + c
    elif variant == "signature":
        y = tf.map_fn(lambda e: _inner(b, e, depth), x, fn_output_signature=tf.TensorSpec(rest, tf.float32))
    elif variant == "cond":
        def fn(e: Any) -> Any:
            return tf.cond(tf.reduce_sum(e) > 0.0, lambda: _inner(b, e, depth), lambda: 0.5 * e)
        b.tag("cond_in_loop")
        y = tf.map_fn(fn, x)
    else:
        y = tf.compat.v1.map_fn(lambda e: _inner(b, e, depth), x, dtype=tf.float32)
    return y, []


def _big_map_fn(b: _Builder, x: Any, depth: int) -> tuple[Any, list[Any]]:
    """``map_fn`` over more than 256 rows (the default ``max_unroll``): x's rows tiled, mapped and averaged back."""
    import tensorflow as tf

    b.tag("map_fn", "map_fn_big")
    b.steps.append("map_fn[>256]")
    shape = x.shape.as_list()
    rows = tf.reshape(x, [-1, shape[-1]])
    n_rows = int(np.prod([d for d in shape[:-1]]))
    reps = 257 // n_rows + 1
    tiled = tf.tile(rows, [reps, 1]) * tf.constant(np.linspace(0.5, 1.5, reps * n_rows, dtype=np.float32)[:, None])
    mapped = tf.map_fn(lambda r: tf.sin(r) * tf.reduce_sum(r), tiled)
    return tf.reduce_mean(tf.reshape(mapped, [reps, *shape]), 0), []


def _scan(b: _Builder, x: Any, depth: int) -> tuple[Any, list[Any]]:
    import tensorflow as tf

    reverse, tuple_state = b.coin(), b.coin(0.4)
    rest = x.shape[1:].as_list()
    n = rest[-1]
    b.tag("scan", *(["scan_reverse"] if reverse else []), *(["scan_tuple"] if tuple_state else []))
    b.steps.append(f"scan[{'rev ' * reverse}{'tuple' if tuple_state else 'single'}]")
    a = b.weight([n], 0.8)
    if tuple_state:
        def fn2(acc: Any, e: Any) -> Any:
            return acc[0] * a + e[0], tf.tanh(acc[1]) + _inner(b, e[0], depth) * e[1]
        init = (tf.zeros(rest), tf.ones(rest) * 0.1)
        y0, y1 = tf.scan(fn2, (x, tf.sin(x)), initializer=init, reverse=reverse)
        return y0 + y1, []
    init = b.pick(["none", "zeros", "first"])
    initializer = None if init == "none" else tf.zeros(rest) if init == "zeros" else 0.3 * x[0]

    def fn(acc: Any, e: Any) -> Any:
        return tf.tanh(acc * a + _inner(b, e, depth))
    return tf.scan(fn, x, initializer=initializer, reverse=reverse), []


def _fold(b: _Builder, x: Any, depth: int) -> tuple[Any, list[Any]]:
    import tensorflow as tf

    op = b.pick(["foldl", "foldr"])
    tuple_elems = b.coin(0.4)
    rest = x.shape[1:].as_list()
    b.tag(op, *(["fold_tuple"] if tuple_elems else []))
    b.steps.append(f"{op}[{'tuple' if tuple_elems else 'single'}]")
    fold = tf.foldl if op == "foldl" else tf.foldr
    a = b.weight([rest[-1]], 0.8)
    if tuple_elems:
        r = fold(lambda acc, e: acc * a + e[0] * tf.tanh(e[1]), (x, 2.0 * x), initializer=tf.zeros(rest))
    else:
        r = fold(lambda acc, e: tf.tanh(acc * a + _inner(b, e, depth)), x, initializer=0.1 * tf.ones(rest))
    return x * tf.sigmoid(r), []


def _while(b: _Builder, x: Any, depth: int) -> tuple[Any, list[Any]]:
    """A hand-written ``tf.while_loop`` over TensorArrays, in many variants."""
    import tensorflow as tf

    n = b.length(x)
    static_n = isinstance(n, int)
    rest = x.shape[1:].as_list()
    trip = b.pick(["fixed", "fed_max_iter", "fed_min", "value"], [3, 1, 1, 1] if static_n else [1, 0, 0, 0])
    read = b.pick(["unstack", "scatter", "split", "twice"] if len(rest) >= 1 and static_n else ["unstack"])
    out = b.pick(["fixed", "dynamic", "unknown_shape"] if trip == "fixed" else ["fixed"])
    final = b.pick(["stack", "gather", "concat"] if out != "dynamic" or static_n else ["stack"])
    inside = b.pick(["none", "cond", "case", "triangular"], [4, 2, 1, 1 if static_n else 0])
    back_prop = not b.coin(0.1)
    uses_size = b.coin(0.3)
    parallel = int(b.pick([1, 10, 32]))
    b.tag("while", f"while_{trip}", f"ta_read_{read}", f"ta_out_{out}", f"ta_final_{final}",
          *([f"while_{inside}"] if inside != "none" else []), *(["ta_size"] if uses_size else []),
          *(["while_no_back_prop"] if not back_prop else []))
    b.steps.append(f"while[{trip} {read}->{out}/{final} {inside}{' no_bp' * (not back_prop)}]")

    keep = inside == "triangular"  # the inner loop reads each element again
    if read == "scatter":
        in_ta = tf.TensorArray(tf.float32, size=n, clear_after_read=not keep).scatter(tf.range(n - 1, -1, -1), x)

        def element(i: Any) -> Any:
            return in_ta.read(n - 1 - i)
    elif read == "split":
        flat = tf.reshape(x, [n * rest[0], *rest[1:]])
        in_ta = tf.TensorArray(tf.float32, size=n, clear_after_read=not keep).split(flat, tf.fill([n], rest[0]))

        def element(i: Any) -> Any:
            return tf.reshape(in_ta.read(i), rest)
    elif read == "twice":
        in_ta = tf.TensorArray(tf.float32, size=n, clear_after_read=False).unstack(x)

        def element(i: Any) -> Any:
            return in_ta.read(i) + 0.5 * tf.tanh(in_ta.read(i))
    else:
        in_ta = tf.TensorArray(tf.float32, size=n, clear_after_read=not keep).unstack(x)

        def element(i: Any) -> Any:
            return in_ta.read(i)

    if out == "fixed":
        out_ta = tf.TensorArray(tf.float32, size=n, element_shape=rest)
    elif out == "dynamic":
        out_ta = tf.TensorArray(tf.float32, size=0, dynamic_size=True)
    else:
        out_ta = tf.TensorArray(tf.float32, size=n, infer_shape=False)
    c = b.weight([rest[-1]], 0.7)
    count: Any = None
    if trip in ("fed_max_iter", "fed_min"):
        count = b.fed_count(int(n))
    if trip == "fed_min":  # no static bound the importer can see: its error asks for stack_capacity=
        b.kwargs["stack_capacity"] = 256
    threshold = float(b.rng.uniform(0.5, 2.0)) * float(np.prod(rest))

    def body(i: Any, h: Any, ta: Any) -> tuple[Any, Any, Any]:
        v = _inner(b, element(i), depth)
        if inside == "cond":
            v = tf.cond(tf.reduce_sum(h) > 0.0, lambda: v * c, lambda: tf.tanh(v) - 0.1)
        elif inside == "case":
            v = tf.case([(tf.reduce_sum(h) > 0.5, lambda: v * c), (tf.reduce_sum(v) < -0.5, lambda: tf.sin(v))],
                        default=lambda: 0.5 * v, exclusive=False)
        elif inside == "triangular":  # an inner loop whose trip count is the outer step
            _, acc = tf.compat.v1.while_loop(lambda k, acc: k < i + 1,
                                             lambda k, acc: (k + 1, acc + 0.3 * tf.tanh(element(k))),
                                             [tf.constant(0), tf.zeros(rest)])
            v = v + acc
        h = tf.tanh(h * c + v)
        if uses_size:
            h = h * (1.0 + 0.05 * tf.cast(ta.size(), tf.float32))
        return i + 1, h, ta.write(i, h)

    kwargs: dict[str, Any] = {"parallel_iterations": parallel, "back_prop": back_prop}
    if trip == "fixed":
        cond = lambda i, h, ta: i < n  # noqa: E731
    elif trip == "fed_max_iter":
        cond = lambda i, h, ta: i < count  # noqa: E731
        kwargs["maximum_iterations"] = n
    elif trip == "fed_min":
        cond = lambda i, h, ta: i < tf.minimum(count, n)  # noqa: E731
    else:
        cond = lambda i, h, ta: tf.logical_and(i < n, tf.reduce_sum(tf.abs(h)) < threshold)  # noqa: E731
    h0 = tf.zeros(rest) if b.coin() else 0.2 * x[0]
    _, h, out_ta = tf.compat.v1.while_loop(cond, body, (tf.constant(0), h0, out_ta), **kwargs)
    if final == "stack":
        y = out_ta.stack()
    elif final == "gather":
        y = out_ta.gather(tf.range(n))
    else:
        y = tf.reshape(out_ta.concat(), [n, *rest]) if len(rest) >= 2 else tf.reshape(out_ta.concat(), [n, *rest])
    # dynamic_size arrays and unknown element shapes hide the static shape
    y = tf.ensure_shape(y, [n if static_n else None, *rest])
    if not back_prop:
        y = 0.5 * x + y  # keep a gradient path: TF gives none through the loop
    return y, [h]


def _while_unbounded(b: _Builder, x: Any, depth: int) -> tuple[Any, list[Any]]:
    """A loop whose trip count depends on values and has no static bound: a ``lax.while_loop`` for jta."""
    import tensorflow as tf

    del depth
    b.tag("while_unbounded")
    b.steps.append("while[unbounded]")
    b.kwargs["stack_capacity"] = 64
    s0 = tf.reduce_mean(tf.abs(x))
    _, s = tf.compat.v1.while_loop(lambda i, s: s < 3.0, lambda i, s: (i + 1, s * 1.3 + 0.2 + 0.1 * tf.sin(s)),
                                   [tf.constant(0), s0])
    return x * tf.tanh(s), []


def _while_grow(b: _Builder, x: Any, depth: int) -> tuple[Any, list[Any]]:
    """A loop that grows a tensor by ``tf.concat`` each step (``shape_invariants`` with a ``None`` leading dim)."""
    import tensorflow as tf

    n = b.length(x)
    rest = x.shape[1:].as_list()
    swap = b.coin(0.3)
    b.tag("while_grow", *(["swap_memory"] if swap else []))
    b.steps.append("while[grow]")

    def body(i: Any, acc: Any) -> tuple[Any, Any]:
        return i + 1, tf.concat([acc, _inner(b, x[i], depth)[None]], 0)
    # The empty start of unknown static length: TF's gradient checks a static [0, ...] against the grown shape.
    start = tf.compat.v1.placeholder_with_default(tf.zeros([0, *rest]), [None, *rest])
    _, acc = tf.compat.v1.while_loop(lambda i, acc: i < n, body, (tf.constant(0), start),
                                     shape_invariants=(tf.TensorShape([]), tf.TensorShape([None, *rest])),
                                     swap_memory=swap)
    return tf.ensure_shape(acc, [n if isinstance(n, int) else None, *rest]), []


def _cond_around(b: _Builder, x: Any, depth: int) -> tuple[Any, list[Any]]:
    """A ``tf.cond`` or ``tf.case`` on a run-time predicate whose branches are stages (loops)."""
    import tensorflow as tf

    kind = b.pick(["cond", "case", "static"], [3, 1, 0.5])
    b.tag(f"cond_around_{kind}")
    b.steps.append(f"{kind}(")
    menu = [_map_fn, _scan, _fold, _while] + ([_rnn, _decoder] if x.shape.rank == 3 and x.shape[0] else [])

    def branch(stage: Callable[..., tuple[Any, list[Any]]]) -> Callable[[], Any]:
        def run() -> Any:
            b.in_branch += 1
            y = stage(b, x, depth)[0]
            b.in_branch -= 1
            if y.shape[-1] != x.shape[-1]:  # an RNN's width: projected back, so the branches agree in shape
                y = tf.tensordot(y, b.weight([int(y.shape[-1]), int(x.shape[-1])]), [[2], [0]])
            return y
        return run

    first, second = b.pick(menu), b.pick(menu + [_pointwise_stage])
    if kind == "static":
        y = tf.cond(tf.constant(b.coin()), branch(first), branch(second))
    elif kind == "cond":
        y = tf.cond(b.predicate(x), branch(first), branch(second))
    else:
        third = b.pick(menu + [_pointwise_stage])
        y = tf.case([(b.predicate(x), branch(first)), (tf.reduce_mean(x) < 0.0, branch(second))],
                    default=branch(third), exclusive=False)
    b.steps.append(")")
    return y, []


def _pointwise_stage(b: _Builder, x: Any, depth: int) -> tuple[Any, list[Any]]:
    del depth
    b.steps.append("pointwise")
    if x.shape[-1] is not None:
        return b.pointwise(x), []
    return x, []


# -- stages on [T, B, F] only ------------------------------------------------------------------------------
def _cell(b: _Builder, n_in: int, scope: str) -> Any:
    """A duck-typed cell, or (when tf_keras provides them) one of TF1's legacy cells and wrappers."""
    import tensorflow as tf

    n_hidden = int(b.rng.integers(2, 5))
    if not (b.legacy and b.coin(0.7)):
        kind = b.pick(["lstm", "gru"])
        b.tag(f"cell_duck_{kind}")
        cls = graph_corpus._LSTM if kind == "lstm" else graph_corpus._GRU
        return cls(n_in, n_hidden, seed=int(b.rng.integers(1 << 30)), dtype=tf.float32, name=b.name(scope))
    cells = tf.compat.v1.nn.rnn_cell
    kind = b.pick(["LSTMCell", "GRUCell", "BasicRNNCell", "BasicLSTMCell", "MultiRNNCell", "ResidualWrapper",
                   "DropoutWrapper"])
    b.tag(f"cell_{kind}")

    def plain(units: int) -> Any:
        which = b.pick(["LSTMCell", "GRUCell", "BasicRNNCell", "BasicLSTMCell"])
        if which == "LSTMCell":
            peep, clip, proj = b.coin(), b.coin(), b.coin()
            b.tag(*(["lstm_peepholes"] if peep else []), *(["lstm_clip"] if clip else []),
                  *(["lstm_proj"] if proj else []))
            return cells.LSTMCell(units, use_peepholes=peep, cell_clip=0.8 if clip else None,
                                  num_proj=units - 1 if proj and units > 2 else None)
        return getattr(cells, which)(units)
    if kind == "MultiRNNCell":
        return cells.MultiRNNCell([plain(n_hidden), plain(int(b.rng.integers(2, 5)))])
    if kind == "ResidualWrapper":  # the residual needs the cell's output size == its input size
        return cells.ResidualWrapper(b.pick([cells.GRUCell, cells.BasicRNNCell, cells.BasicLSTMCell])(n_in))
    if kind == "DropoutWrapper":
        return cells.DropoutWrapper(plain(n_hidden), input_keep_prob=1.0, output_keep_prob=1.0, state_keep_prob=1.0)
    b.tags.pop()
    return plain(n_hidden)


def _initial_state(b: _Builder, cell: Any, x_mean: Any) -> Any:
    """A state derived from the input (so its gradient flows), shaped like ``cell.state_size``."""
    import tensorflow as tf

    def one(size: Any) -> Any:
        return tf.tanh(tf.matmul(x_mean, b.weight([int(x_mean.shape[-1]), int(size)])))
    return tf.nest.map_structure(one, cell.state_size)


def _rnn(b: _Builder, x: Any, depth: int) -> tuple[Any, list[Any]]:
    import tensorflow as tf

    del depth
    steps, batch, n_in = x.shape.as_list()
    kind = b.pick(["dynamic", "bidirectional", "raw", "static", "seq2seq"], [3, 2, 1, 1, 1])
    time_major = b.coin()
    b.tag("rnn", f"rnn_{kind}", *(["time_major"] if time_major else []))
    scope = b.name(f"rnn_{kind}")
    seqlen = None
    if kind in ("dynamic", "bidirectional", "static") and b.coin(0.4):
        b.tag("sequence_length")
        lengths = b.rng.integers(1, steps + 1, size=batch).astype(np.int32)
        seqlen = (b.placeholder(tf.int32, [batch], lengths, "lengths") if b.coin() else tf.constant(lengths))
    inputs = x if time_major else tf.transpose(x, [1, 0, 2])
    if kind in ("dynamic", "bidirectional") and b.coin(0.3):
        # As fed by a placeholder of shape [None, None, n]: the RNN sees no static time or batch size.
        b.tag("rnn_unknown_shape")
        inputs = tf.compat.v1.placeholder_with_default(inputs, [None, None, n_in])
    swap = b.coin(0.2)
    if swap:
        b.tag("swap_memory")
    with tf.compat.v1.variable_scope(scope):
        cell = _cell(b, n_in, "cell")
        state0 = _initial_state(b, cell, tf.reduce_mean(x, 0)) if b.coin(0.4) else None
        if state0 is not None:
            b.tag("initial_state")
        b.steps.append(f"{kind}_rnn[{type(cell).__name__}{' tm' * time_major}{' len' * (seqlen is not None)}]")
        if kind == "dynamic":
            y, state = tf.compat.v1.nn.dynamic_rnn(cell, inputs, sequence_length=seqlen, initial_state=state0,
                                                   dtype=tf.float32, time_major=time_major, swap_memory=swap)
        elif kind == "bidirectional":
            with tf.compat.v1.variable_scope("bw"):
                cell_bw = _cell(b, n_in, "cell_bw")
            (y_fw, y_bw), (s_fw, s_bw) = tf.compat.v1.nn.bidirectional_dynamic_rnn(
                cell, cell_bw, inputs, sequence_length=seqlen, initial_state_fw=state0, dtype=tf.float32,
                time_major=time_major, swap_memory=swap)
            y, state = tf.concat([y_fw, y_bw], -1), (s_fw, s_bw)
        elif kind == "static":
            outs, state = tf.compat.v1.nn.static_rnn(cell, tf.unstack(x), initial_state=state0, dtype=tf.float32,
                                                     sequence_length=seqlen)
            y = tf.stack(outs)
            time_major = True
        elif kind == "raw":
            y, state = _raw_rnn(b, cell, x, state0)
            time_major = True
        else:
            y, state = _seq2seq(b, cell, x, state0)
            time_major = True
    y = y if time_major else tf.transpose(y, [1, 0, 2])
    y = tf.ensure_shape(y, [steps, batch, y.shape[-1]])
    return y, [tf.ensure_shape(t, [batch, t.shape[-1]]) for t in tf.nest.flatten(state)]


def _raw_rnn(b: _Builder, cell: Any, x: Any, state0: Any) -> tuple[Any, Any]:
    """``raw_rnn`` with its docstring's ``loop_fn`` (a ``tf.cond`` per step), time-major."""
    import tensorflow as tf

    steps, batch, n_in = x.shape.as_list()
    lengths = tf.constant(np.maximum(b.rng.integers(1, steps + 1, size=batch), [steps] + [1] * (batch - 1)),
                          tf.int32)
    inputs_ta = tf.TensorArray(tf.float32, size=steps).unstack(x)

    def loop_fn(step: Any, cell_output: Any, cell_state: Any, loop_state: Any) -> tuple[Any, ...]:
        if cell_output is None:
            next_state = cell.zero_state(batch, tf.float32) if state0 is None else state0
        else:
            next_state = cell_state
        finished = step >= lengths
        next_input = tf.cond(tf.reduce_all(finished), lambda: tf.zeros([batch, n_in], tf.float32),
                             lambda: inputs_ta.read(step))
        return finished, next_input, next_state, cell_output, None

    outputs_ta, state, _ = tf.compat.v1.nn.raw_rnn(cell, loop_fn)
    out = outputs_ta.stack()
    return tf.ensure_shape(out, [steps, batch, out.shape[-1]]), state


def _seq2seq(b: _Builder, cell: Any, x: Any, state0: Any) -> tuple[Any, Any]:
    """An encoder (``cell`` over ``x``) and a decoder over embedded fed targets, started from the encoder's state."""
    import tensorflow as tf

    steps, batch, n_in = x.shape.as_list()
    vocab = 5
    b.tag("embedding_lookup")
    _, enc_state = tf.compat.v1.nn.dynamic_rnn(cell, x, initial_state=state0, dtype=tf.float32, time_major=True)
    targets = b.placeholder(tf.int32, [batch, steps], b.rng.integers(0, vocab, (batch, steps)).astype(np.int32),
                            "targets")
    embedded = tf.nn.embedding_lookup(b.weight([vocab, n_in], 2.0), targets)  # [batch, steps, n_in]
    with tf.compat.v1.variable_scope("decoder"):
        dec_cell = _cell(b, n_in, "dec_cell")
        if tf.nest.map_structure(int, dec_cell.state_size) != tf.nest.map_structure(int, cell.state_size):
            dec_state0 = None
        else:
            dec_state0 = enc_state
            b.tag("decoder_from_encoder_state")
        y, state = tf.compat.v1.nn.dynamic_rnn(dec_cell, embedded, initial_state=dec_state0, dtype=tf.float32)
    return tf.transpose(y, [1, 0, 2]), (enc_state, state)


def _decoder(b: _Builder, x: Any, depth: int) -> tuple[Any, list[Any]]:
    """A greedy decoder: each step embeds the previous step's argmax; fixed steps, or until every row emits EOS."""
    import tensorflow as tf

    steps, batch, n = x.shape.as_list()
    vocab = 5
    until_eos = b.coin(0.4)
    fed_table = b.coin(0.4)
    b.tag("decoder", "embedding_lookup", *(["decoder_until_eos"] if until_eos else []),
          *(["embedding_fed"] if fed_table else []))
    b.steps.append(f"decoder[{'eos' if until_eos else 'fixed'}{' fed_table' * fed_table}]")
    if fed_table:
        table = b.placeholder(tf.float32, [vocab, n], b.rng.standard_normal((vocab, n)).astype(np.float32), "emb")
    else:
        table = b.weight([vocab, n], 2.0)
    w_out, u, w_h = b.weight([n, vocab], 2.0), b.weight([n, n]), b.weight([n, n])
    x_ta = tf.TensorArray(tf.float32, size=steps).unstack(x)
    h0 = tf.tanh(tf.reduce_mean(x, 0))

    def body(i: Any, h: Any, token: Any, done: Any, hs: Any, tokens: Any) -> tuple[Any, ...]:
        emb = tf.nn.embedding_lookup(table, token)
        h = tf.tanh(tf.matmul(emb, u) + tf.matmul(h, w_h) + x_ta.read(i))
        token = tf.argmax(tf.matmul(h, w_out), -1, output_type=tf.int32)
        done = tf.logical_or(done, tf.equal(token, 0))
        return i + 1, h, token, done, hs.write(i, h), tokens.write(i, token)

    if until_eos:
        cond = lambda i, h, t, done, *_: tf.logical_not(tf.reduce_all(done))  # noqa: E731
    else:
        cond = lambda i, *_: i < steps  # noqa: E731
    start = (tf.constant(0), h0, tf.ones([batch], tf.int32), tf.zeros([batch], tf.bool),
             tf.TensorArray(tf.float32, size=steps, element_shape=[batch, n]),
             tf.TensorArray(tf.int32, size=steps, element_shape=[batch]))
    _, h, _, _, hs, tokens = tf.compat.v1.while_loop(cond, body, start, maximum_iterations=steps if until_eos else None)
    if depth == 0 and not b.in_branch:
        b.side.append(tf.ensure_shape(tokens.stack(), [steps, batch]))
    return tf.ensure_shape(hs.stack(), [steps, batch, n]), [h]


def _jacobian(b: _Builder, x: Any) -> None:
    """A side output: the ``parallel_for`` jacobian of a small TensorArray loop over ``x[:, 0]``."""
    import tensorflow as tf
    from tensorflow.python.ops.parallel_for import gradients as pfor_gradients

    # use_pfor=False (tf.gradients inside a while_loop) cannot differentiate a loop: TF refuses to build it;
    # batch_jacobian fails in TF 2.21's graph mode ('int' object has no attribute 'is_compatible_with').
    of_rows = b.coin(0.3)
    b.tag("jacobian")
    b.steps.append(f"+jacobian[{'rows' if of_rows else 'x'}]")
    rows = x[:, 0]
    steps, n = rows.shape.as_list()
    w = b.weight([n, n])
    rows_ta = tf.TensorArray(tf.float32, size=steps).unstack(rows)
    _, _, ys = tf.compat.v1.while_loop(
        lambda i, *_: i < steps,
        lambda i, h, ys: _jacobian_step(i, h, ys, rows_ta, w),
        (tf.constant(0), tf.zeros([n]), tf.TensorArray(tf.float32, size=steps)))
    y = ys.stack()
    b.extras.append(y)
    b.side.append(pfor_gradients.jacobian(y, rows if of_rows else x, use_pfor=True))


def _jacobian_step(i: Any, h: Any, ys: Any, rows_ta: Any, w: Any) -> tuple[Any, Any, Any]:
    import tensorflow as tf

    h = tf.tanh(rows_ta.read(i) + tf.linalg.matvec(w, h))
    return i + 1, h, ys.write(i, h)


_TOP_STAGES: list[tuple[Callable[..., tuple[Any, list[Any]]], float]] = [
    (_map_fn, 2), (_big_map_fn, 0.3), (_scan, 2), (_fold, 1), (_while, 4), (_while_unbounded, 0.4),
    (_cond_around, 2), (_rnn, 3), (_decoder, 1), (_while_grow, 0.4),
]


def _build(b: _Builder) -> tuple[Any, list[Any]]:
    """The program's placeholders and stages; returns the graph's forward outputs."""
    import tensorflow as tf

    steps, batch, n = int(b.rng.integers(2, 7)), int(b.rng.integers(1, 4)), int(b.rng.integers(2, 5))
    unknown = b.coin(0.15)
    x = b.placeholder(tf.float32, [None if unknown else steps, batch, n],
                      (0.7 * b.rng.standard_normal((steps, batch, n))).astype(np.float32), "x")
    if unknown:
        b.tag("unknown_leading_dim")
        b.steps.append("x[?]")
    h = x
    stages, weights = zip(*_TOP_STAGES, strict=True)
    for _ in range(int(b.pick([1, 2, 3], [4, 3, 1]))):
        static = h.shape.rank == 3 and h.shape[0] is not None
        options = [s for s in stages if static or s not in (_rnn, _decoder, _big_map_fn)]
        stage = b.pick(options, [weights[stages.index(s)] for s in options])
        h, extras = stage(b, h, 0)
        b.extras.extend(extras)
    if x.shape[0] is not None and b.coin(0.12):
        _jacobian(b, x)
    forward = [h, *b.extras]
    if unknown:  # the loss's weights need static shapes: every stage keeps the leading dimension
        forward = [t if t.shape.is_fully_defined() else tf.ensure_shape(t, [steps, *t.shape[1:]]) for t in forward]
    return x, forward


def generate(seed: int, legacy: bool | None = None) -> Program:
    """The program of ``seed`` (with TF1's legacy cells among its cells when ``legacy``, by default when available).

    **Arguments:**

    - `seed`: any int; the same seed gives the same program (for the same ``legacy``).
    - `legacy`: whether RNN stages may use ``tf.compat.v1.nn.rnn_cell`` cells (default: when available).

    **Returns:** a :class:`Program` (frozen graph, feeds, Session.run's results, tags).
    """
    import tensorflow as tf

    legacy = legacy_cells_available() if legacy is None else legacy
    b = _Builder(seed, legacy)
    with k_graph() as graph:
        tf.compat.v1.set_random_seed(seed)
        try:
            _, forward = _build(b)
            return _finish(b, graph, forward)
        except Exception as e:  # TF refused to build or run the program: a generator bug, said with the seed
            raise RuntimeError(f"tf1_programs.generate({seed}, legacy={legacy}): {' > '.join(b.steps)}: "
                               f"{type(e).__name__}: {str(e)[:2000]}") from e


def _finish(b: _Builder, graph: Any, forward: list[Any]) -> Program:
    """Loss, gradients (of the float inputs that have one), freezing and one Session.run."""
    import tensorflow as tf

    loss = graph_corpus._weighted_sum(forward, seed=int(b.rng.integers(1 << 30)))
    named = [tf.identity(loss, name="loss")]
    named += [tf.identity(t, name=f"out{k}") for k, t in enumerate(forward)]
    named += [tf.identity(t, name=f"side{k}") for k, t in enumerate(b.side)]
    floats = [k for k, p in enumerate(b.placeholders) if p.dtype == tf.float32]
    grads = tf.gradients(loss, [b.placeholders[k] for k in floats])
    grad_inputs = [k for k, g in zip(floats, grads, strict=True) if g is not None]
    for k, g in zip(floats, grads, strict=True):
        if g is not None:
            named.append(tf.identity(tf.convert_to_tensor(g), name=f"grad_{b.placeholders[k].op.name}"))
    frozen, outputs, inputs, expected, _ = graph_corpus.freeze_and_run(graph, named, b.placeholders, b.feeds, 1)
    description = " > ".join(b.steps)
    for a, c in (("( > ", "("), (" > )", ")"), (" > {", " {"), ("{ > ", "{"), (" > }", "}")):
        description = description.replace(a, c)
    return Program(seed=b.seed, description=description,
                   tags=frozenset(b.tags), graph_def=frozen, inputs=inputs, outputs=outputs,
                   n_forward=1 + len(forward), n_side=len(b.side), feeds=b.feeds, expected=expected,
                   grad_inputs=grad_inputs, import_kwargs=dict(b.kwargs), rtol=2e-4)


if __name__ == "__main__":
    for arg in sys.argv[1:] or ["0"]:
        program = generate(int(arg))
        print(f"seed {arg}: {program.description}\n  tags {sorted(program.tags)}\n  {len(program.graph_def.node)} nodes, "
              f"inputs {program.inputs}, {len(program.grad_inputs)} gradients, kwargs {program.import_kwargs}")
