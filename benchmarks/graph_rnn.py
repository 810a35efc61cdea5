"""``python -m benchmarks.graph_rnn``: an imported TF1 train step against TensorFlow's own Session.run.

A TF1 graph (control flow v1) runs ``tf.compat.v1.nn.dynamic_rnn`` over an LSTM cell and over a
GRU cell (the GRU also with a fed ``sequence_length``), adds a loss and
``tf.compat.v1.gradients`` of it with respect to the weights and the inputs. The weights are
placeholders, fed on every call, so neither side can constant-fold them. The same graph runs

* ``tf_session``: ``Session.run([loss, grads], feed_dict)``;
* ``tf_callable``: ``Session.make_callable`` of the same fetches (less Python per call);
* ``jta``: ``jax.jit(jta.import_graph_def(graph_def, inputs, outputs))``;
* ``jax_scan``: a hand-written ``lax.scan`` of the same cell with ``jax.value_and_grad`` (a
  lower bound for what the imported graph could cost).

Calls are interleaved (:mod:`benchmarks.timing`), medians reported; the compile time of the
jitted import (trace + lower + compile, from cleared caches) is reported too, and ``--hlo``
prints, per while loop of the optimized HLO, the instructions of its body (what one step
costs). The results go to ``benchmarks/results/graph_rnn.json``.

The cells are duck-typed (``state_size``, ``output_size``, ``zero_state``, ``__call__``): under
Keras 3 ``tf.compat.v1.nn.rnn_cell.LSTMCell`` is not available. They build the same ops as TF1's
``LSTMCell`` (no peepholes, forget bias 1) and ``GRUCell``: ``MatMul`` of ``ConcatV2([x, h])``,
``BiasAdd``, ``Split``, ``Sigmoid``/``Tanh``.

``--dots`` also times, in a loop of T steps, each matrix product one step of the cell's forward and
backward makes (XLA:CPU's kernel, as ``jax.jit`` compiles it, against TensorFlow's ``MatMul`` in a
``tf.function`` while loop): at large sizes the step is bound by them, and the JSON keeps both.
The JSON also keeps the method (interleaved medians), the thread settings of both sides (TensorFlow's
session threads, ``--tf-threads``; ``XLA_FLAGS``) and ``--note`` (e.g. that the machine was shared).

    python -m benchmarks.graph_rnn            # batch 16, hidden 64, T 100
    python -m benchmarks.graph_rnn --quick    # fewer repeats
    python -m benchmarks.graph_rnn --hlo      # also the per-step HLO of each jitted function
    python -m benchmarks.graph_rnn --batch 64 --hidden 256 --dots   # matmul-bound: the dots alone
"""

from __future__ import annotations

import argparse
import collections
import dataclasses
import functools
import json
import os
import platform
import re
import time
from collections.abc import Callable
from typing import Any

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
from jax import lax  # noqa: E402

import jta  # noqa: E402

from .timing import time_compile, time_interleaved  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))


# -- the TF1 graph --------------------------------------------------------------------------------
class _Cell:
    """A duck-typed TF1 RNN cell whose weights are given tensors (placeholders)."""

    def __init__(self, n_hidden: int, weights: list[tuple[Any, Any]]):
        self.n = n_hidden
        self.weights = weights

    @property
    def output_size(self) -> int:
        return self.n

    def _affine(self, k: int, x: Any, h: Any) -> Any:
        import tensorflow as tf

        kernel, bias = self.weights[k]
        return tf.nn.bias_add(tf.matmul(tf.concat([x, h], 1), kernel), bias)


class _LSTM(_Cell):
    """TF1 ``LSTMCell(num_units)``: state ``(c, h)``, gates ``i, j, f, o``, forget bias 1."""

    @property
    def state_size(self) -> tuple[int, int]:
        return (self.n, self.n)

    def zero_state(self, batch_size: Any, dtype: Any) -> tuple[Any, Any]:
        import tensorflow as tf

        return (tf.zeros([batch_size, self.n], dtype), tf.zeros([batch_size, self.n], dtype))

    def __call__(self, inputs: Any, state: Any) -> tuple[Any, Any]:
        import tensorflow as tf

        c, h = state
        i, j, f, o = tf.split(self._affine(0, inputs, h), 4, axis=1)
        c = tf.sigmoid(f + 1.0) * c + tf.sigmoid(i) * tf.tanh(j)
        h = tf.sigmoid(o) * tf.tanh(c)
        return h, (c, h)


class _GRU(_Cell):
    """TF1 ``GRUCell(num_units)``: gates ``r, u`` from one affine map, the candidate from another."""

    @property
    def state_size(self) -> int:
        return self.n

    def zero_state(self, batch_size: Any, dtype: Any) -> Any:
        import tensorflow as tf

        return tf.zeros([batch_size, self.n], dtype)

    def __call__(self, inputs: Any, state: Any) -> tuple[Any, Any]:
        import tensorflow as tf

        r, u = tf.split(tf.sigmoid(self._affine(0, inputs, state)), 2, axis=1)
        c = tf.tanh(self._affine(1, inputs, r * state))
        h = u * state + (1 - u) * c
        return h, h


@dataclasses.dataclass
class Case:
    """One train-step graph: what to feed, what to fetch, and the numpy feeds."""

    name: str
    cell: str  # "lstm" or "gru"
    graph_def: Any
    inputs: list[str]
    outputs: list[str]
    feeds: list[np.ndarray]
    seqlen: bool


def _widths(cell: str, hidden: int) -> list[int]:
    return [4 * hidden] if cell == "lstm" else [2 * hidden, hidden]


def build(cell: str, batch: int, steps: int, n_in: int, hidden: int, seqlen: bool, weights: str = "fed",
          cells: str = "duck") -> Case:
    """The TF1 train step: ``dynamic_rnn``, ``loss = mean((y - target)**2)`` plus the final state's
    squares, and ``tf.compat.v1.gradients`` of the loss w.r.t. every weight and the inputs.

    ``weights="fed"``: the weights are placeholders; ``"frozen"``: variables frozen to constants
    (``convert_variables_to_constants``). ``cells="tf"`` uses ``tf.compat.v1.nn.rnn_cell``'s own
    cells (needs ``tf_keras`` and ``TF_USE_LEGACY_KERAS=1`` before TensorFlow is imported; their
    variables are always frozen)."""
    import tensorflow as tf

    rng = np.random.default_rng(0)
    was_v2 = tf.compat.v1.control_flow_v2_enabled()
    tf.compat.v1.disable_control_flow_v2()
    try:
        graph = tf.Graph()
        with graph.as_default():
            x = tf.compat.v1.placeholder(tf.float32, [batch, steps, n_in], name="x")
            target = tf.compat.v1.placeholder(tf.float32, [batch, steps, hidden], name="target")
            placeholders = [x, target]
            feeds: list[np.ndarray[Any, Any]] = [rng.standard_normal((batch, steps, n_in)).astype(np.float32),
                     rng.standard_normal((batch, steps, hidden)).astype(np.float32)]
            params: list[tuple[Any, Any]] = []
            if cells == "duck":
                for k, width in enumerate(_widths(cell, hidden)):
                    kernel = (rng.standard_normal((n_in + hidden, width)) / np.sqrt(n_in + hidden)).astype(np.float32)
                    bias = (0.1 * rng.standard_normal(width)).astype(np.float32)
                    if weights == "fed":
                        pair = (tf.compat.v1.placeholder(tf.float32, kernel.shape, name=f"kernel_{k}"),
                                tf.compat.v1.placeholder(tf.float32, bias.shape, name=f"bias_{k}"))
                        placeholders += list(pair)
                        feeds += [kernel, bias]
                    else:
                        pair = (tf.Variable(tf.constant(kernel), name=f"kernel_{k}"),
                                tf.Variable(tf.constant(bias), name=f"bias_{k}"))
                    params.append(pair)
                model: Any = _LSTM(hidden, params) if cell == "lstm" else _GRU(hidden, params)
            else:
                rnn_cell = tf.compat.v1.nn.rnn_cell
                model = rnn_cell.LSTMCell(hidden) if cell == "lstm" else rnn_cell.GRUCell(hidden)
            kwargs: dict[str, Any] = {}
            if seqlen:
                lengths = tf.compat.v1.placeholder(tf.int32, [batch], name="seqlen")
                placeholders.append(lengths)
                feeds.append(rng.integers(steps // 2, steps + 1, batch).astype(np.int32))
                kwargs["sequence_length"] = lengths
            y, state = tf.compat.v1.nn.dynamic_rnn(model, x, dtype=tf.float32, **kwargs)
            loss = tf.reduce_mean(tf.square(y - target))
            for s in tf.nest.flatten(state):
                loss = loss + tf.reduce_mean(tf.square(s))
            loss = tf.identity(loss, name="loss")
            variables = tf.compat.v1.trainable_variables()
            wrt = ([w for pair in params for w in pair] if weights == "fed" and cells == "duck" else variables) + [x]
            grads = [tf.identity(tf.convert_to_tensor(g), name=f"grad_{k}")
                     for k, g in enumerate(tf.compat.v1.gradients(loss, wrt))]
            outputs = [loss.name] + [g.name for g in grads]
            if variables:
                with tf.compat.v1.Session(graph=graph) as sess:
                    sess.run(tf.compat.v1.global_variables_initializer())
                    graph_def = tf.compat.v1.graph_util.convert_variables_to_constants(
                        sess, graph.as_graph_def(), [n.split(":")[0] for n in outputs])
            else:
                graph_def = graph.as_graph_def()
    finally:
        if was_v2:
            tf.compat.v1.enable_control_flow_v2()
    name = f"{cell}{'_seqlen' if seqlen else ''}"
    return Case(name, cell, graph_def, [p.name for p in placeholders], outputs, feeds, seqlen)


def session_fns(case: Case, threads: int = 0) -> tuple[dict[str, Callable[..., Any]], Any]:
    """``Session.run`` and ``Session.make_callable`` of the case's fetches (and the session, to close);
    ``threads``: the session's intra- and inter-op threads (0: TensorFlow's default, every core)."""
    import tensorflow as tf

    was_v2 = tf.compat.v1.control_flow_v2_enabled()
    tf.compat.v1.disable_control_flow_v2()
    try:
        graph = tf.Graph()
        with graph.as_default():
            tf.graph_util.import_graph_def(case.graph_def, name="")
    finally:
        if was_v2:
            tf.compat.v1.enable_control_flow_v2()
    config = tf.compat.v1.ConfigProto(intra_op_parallelism_threads=threads, inter_op_parallelism_threads=threads)
    sess = tf.compat.v1.Session(graph=graph, config=config)
    fetches = list(case.outputs)

    def run(*feeds: Any) -> Any:
        return sess.run(fetches, dict(zip(case.inputs, feeds, strict=True)))

    callable_ = sess.make_callable(fetches, feed_list=list(case.inputs))
    return {"tf_session": run, "tf_callable": callable_}, sess


# -- the hand-written JAX version -----------------------------------------------------------------
def jax_step(case: Case) -> Callable[..., Any]:
    """The same loss and gradients by ``lax.scan`` and ``jax.value_and_grad`` (same argument order)."""
    lstm = case.cell == "lstm"

    def loss_fn(params: tuple[Any, ...], x: Any, target: Any, lengths: Any) -> Any:
        batch, hidden = x.shape[0], target.shape[-1]
        xs = jnp.swapaxes(x, 0, 1)
        zeros = jnp.zeros((batch, hidden), x.dtype)

        def cell(carry: Any, inp: Any) -> Any:
            t, xt = inp
            if lstm:
                (kernel, bias), (c, h) = params, carry
                i, j, f, o = jnp.split(jnp.concatenate([xt, h], 1) @ kernel + bias, 4, axis=1)
                c2 = jax.nn.sigmoid(f + 1.0) * c + jax.nn.sigmoid(i) * jnp.tanh(j)
                h2 = jax.nn.sigmoid(o) * jnp.tanh(c2)
                new, out = (c2, h2), h2
            else:
                kernel0, bias0, kernel1, bias1 = params
                h = carry
                r, u = jnp.split(jax.nn.sigmoid(jnp.concatenate([xt, h], 1) @ kernel0 + bias0), 2, axis=1)
                cand = jnp.tanh(jnp.concatenate([xt, r * h], 1) @ kernel1 + bias1)
                h2 = u * h + (1 - u) * cand
                new, out = h2, h2
            if lengths is not None:
                live = (t < lengths)[:, None]
                new = jax.tree_util.tree_map(lambda n, o: jnp.where(live, n, o), new, carry)
                out = jnp.where(live, out, 0.0)
            return new, out

        init = (zeros, zeros) if lstm else zeros
        state, ys = lax.scan(cell, init, (jnp.arange(xs.shape[0]), xs))
        loss = jnp.mean(jnp.square(jnp.swapaxes(ys, 0, 1) - target))
        for s in jax.tree_util.tree_leaves(state):
            loss = loss + jnp.mean(jnp.square(s))
        return loss

    grad = jax.value_and_grad(loss_fn, argnums=(0, 1))

    def step(x: Any, target: Any, *rest: Any) -> list[Any]:
        params, lengths = (rest[:-1], rest[-1]) if case.seqlen else (rest, None)
        loss, (g_params, g_x) = grad(tuple(params), x, target, lengths)
        return [loss, *g_params, g_x]

    return step


# -- the matrix products of one step ----------------------------------------------------------------
def step_dots(cell: str, batch: int, n_in: int, hidden: int) -> dict[str, tuple[tuple[int, int], tuple[int, int],
                                                                             bool, bool]]:
    """The matrix products one step of the cell makes, forward and backward (TF1's ``MatMul`` gradient:
    ``dy @ W^T`` and ``x^T @ dy``), as ``name -> (shape a, shape b, transpose_a, transpose_b)``."""
    k = n_in + hidden
    out = {}
    for j, width in enumerate(_widths(cell, hidden)):
        out[f"x@W{j} [{batch},{k}]x[{k},{width}]"] = ((batch, k), (k, width), False, False)
        out[f"dy@W{j}^T [{batch},{width}]x[{k},{width}]^T"] = ((batch, width), (k, width), False, True)
        out[f"x^T@dy{j} [{batch},{k}]^Tx[{batch},{width}]"] = ((batch, k), (batch, width), True, False)
    return out


def time_dots(cell: str, batch: int, n_in: int, hidden: int, steps: int, repeats: int) -> dict[str, Any]:
    """Each of :func:`step_dots`, ``steps`` times in a loop (each product depending on the last), by
    XLA:CPU (``jax.jit`` of a ``lax.scan``) and by TensorFlow (a ``tf.function`` while loop), interleaved;
    medians in ms per loop."""
    import tensorflow as tf

    rng = np.random.default_rng(0)
    fns: dict[str, tuple[Callable[..., Any], tuple[Any, ...]]] = {}
    for name, (sa, sb, ta, tb) in step_dots(cell, batch, n_in, hidden).items():
        a = (0.01 * rng.standard_normal(sa)).astype(np.float32)
        b = (0.01 * rng.standard_normal(sb)).astype(np.float32)

        def xla_loop(a: Any, b: Any, ta: bool = ta, tb: bool = tb) -> Any:
            def body(c: Any, _: Any) -> tuple[Any, None]:
                x = (a + c).T if ta else a + c
                return c + 1e-9 * jnp.sum((x @ (b.T if tb else b))[:1, :1]), None
            return lax.scan(body, jnp.zeros((), a.dtype), None, length=steps)[0]

        def tf_loop(a: Any, b: Any, ta: bool = ta, tb: bool = tb) -> Any:
            def body(i: Any, c: Any) -> tuple[Any, Any]:
                x = tf.matmul(a + c, b, transpose_a=ta, transpose_b=tb)
                return i + 1, c + 1e-9 * tf.reduce_sum(x[:1, :1])
            return tf.while_loop(lambda i, c: i < steps, body, [0, tf.zeros((), a.dtype)])[1]

        fns[f"xla {name}"] = (jax.jit(xla_loop), (jnp.asarray(a), jnp.asarray(b)))
        tf_fn = tf.function(tf_loop)
        fns[f"tf {name}"] = (lambda a, b, tf_fn=tf_fn: tf_fn(a, b).numpy(), (tf.constant(a), tf.constant(b)))
    timings = time_interleaved(fns, repeats, min_sample_s=0.05)
    ms = {k: t.median * 1e3 for k, t in timings.items()}
    return {"steps": steps, "ms": ms, "xla_total_ms": sum(v for k, v in ms.items() if k.startswith("xla")),
            "tf_total_ms": sum(v for k, v in ms.items() if k.startswith("tf"))}


# -- the optimized HLO ----------------------------------------------------------------------------
_COMPUTATION = re.compile(r"^(?:ENTRY )?%?([\w.\-]+) .*\{\s*$")
_OPCODE = re.compile(r"=\s*[^=]*?\s([a-z][\w\-]*)\(")
_BODY = re.compile(r"body=%?([\w.\-]+)")
_CALLERS = ("fusion", "call", "conditional")  # whose called computations run as part of the step
_CALLS = re.compile(r"(?:calls|to_apply|condition|body|branch_computations)=\{?%?([\w.\-, %]+)\}?")


def hlo_computations(text: str) -> dict[str, list[str]]:
    """The optimized HLO text as ``computation name -> its instruction lines``."""
    comps: dict[str, list[str]] = {}
    current = None
    for line in text.splitlines():
        m = _COMPUTATION.match(line)
        if m and "=" not in line.split("{")[0].split("(")[0]:
            current = m.group(1)
            comps[current] = []
        elif line.strip() == "}":
            current = None
        elif current is not None and "=" in line:
            comps[current].append(line.strip())
    return comps


def _opcode(line: str) -> str:
    m = _OPCODE.search(line)
    return m.group(1) if m else "?"


def _callees(line: str) -> list[str]:
    out = []
    for m in _CALLS.finditer(line):
        out += [n.strip().lstrip("%") for n in m.group(1).split(",") if n.strip()]
    return out


def hlo_summary(text: str) -> dict[str, Any]:
    """Per while loop: the top-level instructions of its body by opcode, and inside its fusions and
    conditional branches the dynamic-update-slices, selects, copies, dynamic slices and dots (one
    step's work); the whole module's counts too."""
    comps = hlo_computations(text)
    loops = []
    for lines in comps.values():
        for line in lines:
            if _opcode(line) != "while":
                continue
            m = _BODY.search(line)
            if not m or m.group(1) not in comps:
                continue
            body = comps[m.group(1)]
            top = collections.Counter(_opcode(x) for x in body)
            inner: collections.Counter[str] = collections.Counter()
            seen: set[str] = set()
            todo = [c for x in body if _opcode(x) in _CALLERS for c in _callees(x)]
            while todo:
                c = todo.pop()
                if c in seen or c not in comps:
                    continue
                seen.add(c)
                for x in comps[c]:
                    inner[_opcode(x)] += 1
                    if _opcode(x) in _CALLERS:
                        todo += _callees(x)
            shape = re.search(r"=\s*(\([^=]*?\)|\S+)\s+while\(", line)
            loops.append({"body": m.group(1), "instructions": len(body),
                          "top_level": dict(top.most_common()),
                          "in_fusions": {k: inner[k] for k in ("dynamic-update-slice", "select", "copy",
                                                               "dynamic-slice", "dot", "conditional") if inner[k]},
                          "carry": shape.group(1)[:300] if shape else ""})
    total = collections.Counter(_opcode(x) for lines in comps.values() for x in lines)
    return {"while_loops": len(loops), "loops": loops,
            "module": {k: total[k] for k in ("while", "conditional", "dynamic-update-slice", "select", "copy",
                                             "dot", "fusion", "sort", "scatter", "gather") if total[k]}}


def print_hlo(name: str, summary: dict[str, Any]) -> None:
    print(f"\n{name}: {summary['while_loops']} while loops; module: {summary['module']}")
    for loop in summary["loops"]:
        print(f"  body {loop['body']}: {loop['instructions']} instructions")
        print(f"    top level: {loop['top_level']}")
        print(f"    in fusions and branches: {loop['in_fusions']}")


# -- the run --------------------------------------------------------------------------------------
def _max_rel(a: list[Any], b: list[Any]) -> float:
    worst = 0.0
    for u, v in zip(a, b, strict=True):
        u, v = np.asarray(u, np.float64), np.asarray(v, np.float64)
        worst = max(worst, float(np.max(np.abs(u - v)) / max(float(np.max(np.abs(v))), 1e-30)))
    return worst


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="5 repeats, 2 compile samples")
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--steps", type=int, default=100)
    parser.add_argument("--inputs", type=int, default=32)
    parser.add_argument("--hidden", type=int, default=64)
    parser.add_argument("--repeats", type=int, default=None)
    parser.add_argument("--cases", default="lstm,gru,gru_seqlen")
    parser.add_argument("--weights", choices=("fed", "frozen"), default="fed",
                        help="weights as placeholders (default) or variables frozen to constants")
    parser.add_argument("--cells", choices=("duck", "tf"), default="duck",
                        help="duck-typed cells (default) or tf.compat.v1.nn.rnn_cell's (needs tf_keras)")
    parser.add_argument("--hlo", action="store_true", help="print the per-step HLO of each jitted function")
    parser.add_argument("--no-compile", action="store_true", help="skip the compile-time samples")
    parser.add_argument("--dots", action="store_true", help="also time each step's matrix products alone")
    parser.add_argument("--tf-threads", type=int, default=0,
                        help="TensorFlow session intra- and inter-op threads (0: every core, its default)")
    parser.add_argument("--note", default="", help="kept in the JSON (e.g. 'shared machine')")
    parser.add_argument("--out", default=os.path.join(HERE, "results", "graph_rnn.json"))
    args = parser.parse_args(argv)
    if args.cells == "tf":
        os.environ["TF_USE_LEGACY_KERAS"] = "1"  # before TensorFlow's first import
    repeats = args.repeats or (5 if args.quick else 15)
    results: dict[str, Any] = {
        "machine": {"platform": platform.platform(), "cpus": os.cpu_count(), "jax": jax.__version__,
                    "device": str(jax.devices()[0])},
        "config": {"batch": args.batch, "steps": args.steps, "inputs": args.inputs, "hidden": args.hidden,
                   "repeats": repeats, "weights": args.weights, "cells": args.cells},
        "method": ("ms per call: median of interleaved samples (benchmarks.timing.time_interleaved: every round "
                   "calls each implementation once, in rotated order; a sample is the mean of back-to-back calls "
                   "lasting at least 0.1 s); compile and first call excluded"),
        "threads": {"tf_session_intra_inter_op": args.tf_threads or f"default ({os.cpu_count()} cores)",
                    "XLA_FLAGS": os.environ.get("XLA_FLAGS", ""), "cpus": os.cpu_count()},
        "note": args.note,
        "cases": {}}
    print(f"batch {args.batch}, T {args.steps}, inputs {args.inputs}, hidden {args.hidden}, weights {args.weights}, "
          f"{args.cells} cells; {repeats} interleaved repeats, medians (ms per call)")
    print(f"{'case':<12}{'tf_session':>12}{'tf_callable':>13}{'jta':>10}{'jax_scan':>10}"
          f"{'jta/tf':>9}{'tf/jta':>9}{'compile s':>11}{'max rel':>10}")
    for name in args.cases.split(","):
        cell, _, rest = name.partition("_")
        case = build(cell, args.batch, args.steps, args.inputs, args.hidden, seqlen=rest == "seqlen",
                     weights=args.weights, cells=args.cells)
        tf_fns, sess = session_fns(case, args.tf_threads)
        start = time.perf_counter()
        imported = jta.import_graph_def(case.graph_def, case.inputs, case.outputs)
        import_s = time.perf_counter() - start
        jitted = jax.jit(imported)
        device_args = tuple(jnp.asarray(f) for f in case.feeds)
        cases = {**{k: (fn, tuple(case.feeds)) for k, fn in tf_fns.items()}, "jta": (jitted, device_args)}
        compile_cases = {"jta": (functools.partial(jax.jit, imported), device_args)}
        native = None
        if args.weights == "fed" and args.cells == "duck":  # the hand-written step takes the weights as arguments
            native = jax.jit(jax_step(case))
            cases["jax_scan"] = (native, device_args)
            compile_cases["jax_scan"] = (functools.partial(jax.jit, jax_step(case)), device_args)
        timings = time_interleaved(cases, repeats, min_sample_s=0.1)
        expected = timings["tf_session"].output
        compile_s: dict[str, float] = {}
        if not args.no_compile:
            comp = time_compile(compile_cases, repeats=2 if args.quick else 3)
            compile_s = {k: t.median for k, t in comp.items()}
        ms = {k: t.median * 1e3 for k, t in timings.items()}
        entry: dict[str, Any] = {
            "ms": ms, "samples_ms": {k: [s * 1e3 for s in t.samples] for k, t in timings.items()},
            "jta_over_tf_session": ms["jta"] / ms["tf_session"],
            "jta_over_tf_callable": ms["jta"] / ms["tf_callable"],
            "jta_over_jax_scan": ms["jta"] / ms["jax_scan"] if "jax_scan" in ms else None,
            "compile_s": compile_s, "import_s": import_s,
            "max_rel_error": {k: _max_rel(timings[k].output, expected) for k in ms if k.startswith("j")},
            "hlo": {impl: hlo_summary(str(fn.lower(*device_args).compile().as_text()))
                    for impl, fn in (("jta", jitted), ("jax_scan", native)) if fn is not None}}
        if args.dots and not case.seqlen:
            entry["dots"] = time_dots(cell, args.batch, args.inputs, args.hidden, args.steps, repeats)
        results["cases"][name] = entry
        nan = float("nan")
        print(f"{name:<12}{ms['tf_session']:>12.2f}{ms['tf_callable']:>13.2f}{ms['jta']:>10.2f}"
              f"{ms.get('jax_scan', nan):>10.2f}{ms['jta'] / ms['tf_session']:>9.2f}{ms['tf_session'] / ms['jta']:>9.2f}"
              f"{compile_s.get('jta', nan):>11.2f}{entry['max_rel_error']['jta']:>10.1e}", flush=True)
        sess.close()
    print("jta/tf: time of the jitted import over Session.run (below 1: jta is faster); "
          "compile s: trace + lower + compile of the jitted import, from cleared caches")
    for name, entry in results["cases"].items():
        if "dots" in entry:
            d = entry["dots"]
            print(f"{name}: the step's matrix products alone, {d['steps']} steps: XLA:CPU {d['xla_total_ms']:.1f} ms, "
                  f"TensorFlow {d['tf_total_ms']:.1f} ms")
            for k, v in d["ms"].items():
                print(f"    {k:<48}{v:>9.2f} ms")
    if args.hlo:
        for name, entry in results["cases"].items():
            for impl, summary in entry["hlo"].items():
                print_hlo(f"{name} {impl}", summary)
    os.makedirs(os.path.dirname(args.out), exist_ok=True)
    with open(args.out, "w") as f:
        json.dump(results, f, indent=1)
    print(f"\nwrote {args.out}")
    return results


if __name__ == "__main__":
    main()
