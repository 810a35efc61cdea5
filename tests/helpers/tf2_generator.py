"""Seeded random TF2 programs (``tf.function`` with TensorArrays), for fuzzing ``jta.import_function``.

:func:`generate` composes one small program per seed, in the spirit of :mod:`tests.helpers.tf1_programs`:
one to three *stages* applied in turn to an argument ``x`` of shape ``[T, D]`` (``T <= 6``, ``D <= 3``), each
one of the constructs TF2 users write inside a ``tf.function``:

* autograph loops ``for i in tf.range(n)`` over ``tf.TensorArray``s, with ``n`` static, a shape
  (``tf.shape(x)[0]``), or an int32 argument (data-dependent), clipped by ``tf.minimum`` or not; with a
  data-dependent ``break`` (``maximum_iterations=-1``, the bound only in the condition), an autograph
  ``if`` on the data inside, a previous step's element read back, several arrays in one loop (an int32
  array of per-step argmaxes), the input unstacked into an array and read per step;
* arrays of fixed size or ``dynamic_size=True``, element shape known or unknown, float32 or float64;
* ``tf.while_loop`` with a data-dependent condition, bounded by ``maximum_iterations=``, by a counter
  in the condition, or not at all (a contraction that ends);
* ``tf.map_fn`` (``fn_output_signature``, tuples), ``tf.scan`` (``reverse``), ``tf.foldl``/``tf.foldr``;
* nested loops (an inner loop of static or triangular trip count), a greedy decoder (``dynamic_size``,
  ``tf.gather`` of an embedding, argmax, EOS ``break``), a ``tf_keras`` RNN layer (SimpleRNN, GRU, LSTM);
* array ops outside loops: ``split``/``concat``/``scatter``/``gather``/``unstack``/``read``/``size``.

From a second random stream of the seed (so the stages above, their variables and the arguments are what the
seed gave before these existed; :func:`generate` with ``extras=False`` leaves the extra stage out), half the
programs get one more stage, at a random place, of the families where the importer had real bugs
(:data:`EXTRA_STAGES`):

* ``branch_write``: a TensorArray written in one branch of a run-time ``if`` in a loop (the filter idiom
  ``if x[i, 0] > thr: ta = ta.write(j, ...); j += 1``) or in both with different values; fixed size or
  ``dynamic_size``, element shape known or not;
* ``cond_tape``: ``tf.cond``, an autograph ``if`` or ``tf.switch_case`` (its index in range, the loop counter's,
  or out of range: the default branch), inside or outside a loop, whose branches compute different
  intermediates (op types, a float64 one, counts, none), a ``tf.cond`` nested in a branch;
* ``custom_grad``: ``tf.custom_gradient`` (gradient clipping, reversal, scaling, straight-through, a captured
  variable's gradient) and ``tf.recompute_grad``, inside or outside a loop;
* ``stop_grad``: ``tf.stop_gradient`` outside or inside a loop, ``tape.stop_recording()`` in the train step,
  ``tf.while_loop(back_prop=False)``;
* ``known_failing`` (weight 0 unless ``JTA_TF2_KNOWN_FAILING=1``): ``TensorArray.split``/``concat`` inside loops,
  ``infer_shape=False`` arrays, ``tf.gather``/``tf.where`` inside loops;
* ``counter_write``, ``masked_rows``, ``nested_growth`` (:mod:`tests.helpers.tf2_generator_extra`): writes under
  conditions on the loop counter (``if i % 2 == 0``, ``if i >= k``, ...); ``tf.boolean_mask``/``tf.where``/
  ``tf.unique`` in loop bodies and run-time branches, their rows read (``s[0]``, ``top_k``, ``softmax``, ...);
  an inner loop without a static bound inside an outer loop of the data's trip count, growing a ``dynamic_size``
  array;
* ``grown_tensor`` (:mod:`tests.helpers.tf2_generator_grow`): a tensor grown by ``tf.concat`` in a loop
  (``shape_invariants``), for a static, shape, argument or data-decided trip count.

The environment knob ``JTA_TF2_EXTRA=family[,family...]`` gives every program one stage of those families
(``known_failing`` too), drawn from the same second stream (the other stages stay the seed's); with
``JTA_TF2_EXTRA_ONLY=1`` as well, the program is that stage alone (the draws of the stage the same).

Each stage ends its arrays with ``stack``, ``gather``, ``concat`` or ``size`` and adds outputs; the math in
between uses the program's variables (``matvec``, ``tanh``, ...). A :class:`Program` holds the forward
``tf.function``, a train step (a ``tf.GradientTape`` inside a ``tf.function``: the loss, the sum of squares of
the float outputs, and the gradients of every variable), the variables, the example arguments, the tags of the
constructs it used and whether some loop's trip count is the data's (:attr:`Program.dynamic`).

``python -m tests.helpers.tf2_generator SEED...`` prints the programs of some seeds.
"""

from __future__ import annotations

import dataclasses
import os
import sys
from collections.abc import Callable
from typing import Any

import numpy as np

from . import tf2_generator_extra, tf2_generator_grow
from .tf2_generator_extra import pick_trip_count, trip_count


@dataclasses.dataclass
class Program:
    seed: int
    description: str
    tags: frozenset[str]
    forward: Any  # tf.function(*args) -> tuple of tensors
    train: Any  # tf.function(*args) -> (loss, [gradient of each variable])
    variables: list[Any]
    args: tuple[Any, ...]
    dynamic: bool  # a loop's trip count is the data's (its stacks are padded under jit)


class _Builder:
    """The seed's random choices, the program's variables, and what it records of itself."""

    def __init__(self, seed: int):
        import tensorflow as tf

        self.tf = tf
        self.r = np.random.default_rng(seed)
        self.seed = seed
        self.t = int(self.r.integers(3, 7))
        self.d = int(self.r.integers(2, 4))
        self.tags: set[str] = set()
        self.parts: list[str] = []
        self.variables: list[Any] = []
        self.n_arg = False  # the program takes a trip count n as its second argument
        self.dynamic = False
        self.tape: Any = None  # the train step's GradientTape while its forward is traced (tape.stop_recording)

    def var(self, name: str, shape: tuple[int, ...], scale: float = 0.5) -> Any:
        v = self.tf.Variable((self.r.normal(size=shape) * scale).astype(np.float32), name=f"{name}{len(self.variables)}")
        self.variables.append(v)
        return v

    def pick(self, *options: Any) -> Any:
        return options[int(self.r.integers(len(options)))]

    def chance(self, p: float) -> bool:
        return bool(self.r.random() < p)

    def tag(self, *tags: str) -> None:
        self.tags.update(tags)


Stage = Callable[[Any, Any, list[Any]], Any]  # (x, n, outputs) -> the next stage's x


def _finish_array(b: _Builder, ta: Any, how: str, n_rows: int) -> Any:
    """A stage's array read out: its stack, a gather, its concat, or its size beside its stack."""
    if how == "gather":
        # every row once, in a shuffled order: TensorFlow's tape gradient of a TensorList gather scatters, so
        # the gradients of a repeated index overwrite each other (tests/test_tf2_import.py: jax.grad sums them,
        # TF's tape does not); and a gather that leaves rows out (3 of T > 3) of an array written in a loop gave
        # tape gradients off from finite differences in 18 of seeds 0-299 (jax.grad agreed with them)
        picks = [int(k) for k in b.r.permutation(n_rows)]
        return [ta.gather(picks)]
    if how == "concat":
        return [ta.concat()]
    if how == "size":
        return [ta.stack(), ta.size()]
    return [ta.stack()]


def _for_loop(b: _Builder) -> Stage:
    """An autograph for loop over tf.range writing one or two TensorArrays."""
    tf, t, d = b.tf, b.t, b.d
    n_kind = b.pick("static", "static", "shape", "arg", "arg_raw")
    if n_kind in ("arg", "arg_raw"):
        b.n_arg = True
    fixed = b.chance(0.5)
    known = b.chance(0.6)
    dtype = b.pick(tf.float32, tf.float32, tf.float64)
    prev = fixed and known and b.chance(0.4)
    brk = b.chance(0.35)
    cond_inside = b.chance(0.3)
    unstack = b.chance(0.35)
    ints = b.chance(0.3)
    how = b.pick("stack", "stack", "gather", "concat", "size") if not brk or fixed else b.pick("stack", "size")
    if how == "gather" and n_kind in ("arg", "arg_raw"):
        how = "stack"  # the gather's static indices would be out of range for a smaller n
    w, u = b.var("w", (d, d)), b.var("u", (d,))
    threshold = float(b.r.uniform(0.2, 1.5))
    b.tag(f"for_{n_kind}", "ta_fixed" if fixed else "ta_dynamic", f"shape_{'known' if known else 'unknown'}",
          *(["f64"] if dtype == tf.float64 else []), *(["read_prev"] if prev else []), *(["break"] if brk else []),
          *(["cond_in_loop"] if cond_inside else []), *(["unstack_read"] if unstack else []),
          *(["int_array"] if ints else []), f"finish_{how}")
    if brk or n_kind in ("arg", "arg_raw"):
        b.dynamic = True
    b.parts.append(f"for[{n_kind}{' break' if brk else ''}{' if' if cond_inside else ''}] "
                   f"ta({'fixed' if fixed else 'dynamic'}, {'known' if known else 'unknown'} shape, {dtype.name}"
                   f"{', prev' if prev else ''}{', unstack' if unstack else ''}{', +int' if ints else ''}) -> {how}")

    def stage(x: Any, n_in: Any, outs: list[Any]) -> Any:
        n = t if n_kind == "static" else tf.shape(x)[0] if n_kind == "shape" else \
            tf.minimum(n_in, t) if n_kind == "arg" else n_in  # arg_raw: no static bound at all
        ta = tf.TensorArray(dtype, size=n if fixed else 0, dynamic_size=not fixed,
                            element_shape=(d,) if known else None)
        xs = tf.TensorArray(dtype, size=t, element_shape=(d,) if known else None).unstack(tf.cast(x, dtype)) \
            if unstack else None
        ia = tf.TensorArray(tf.int32, size=0, dynamic_size=True)
        wd, ud = tf.cast(w, dtype), tf.cast(u, dtype)
        h = tf.zeros([d], dtype)
        for i in tf.range(n):
            xi = xs.read(i) if xs is not None else tf.cast(x[i], dtype)
            pre = tf.linalg.matvec(wd, xi) + h
            if prev:
                pre = pre + 0.5 * ta.read(tf.maximum(i - 1, 0))
            if cond_inside:
                if tf.reduce_sum(xi) > 0:
                    h = tf.tanh(pre)
                else:
                    h = 0.5 * h + ud * xi
            else:
                h = tf.tanh(pre) * ud
            ta = ta.write(i, h)
            if ints:
                ia = ia.write(i, tf.argmax(h, output_type=tf.int32))
            if brk:
                if tf.reduce_sum(h) > threshold:
                    break
        outs.extend(_finish_array(b, ta, how, t))
        outs.append(h)
        if ints:
            outs.append(ia.stack())
        return x + tf.cast(h, tf.float32)
    return stage


def _while(b: _Builder) -> Stage:
    """tf.while_loop with a data-dependent condition: bounded by maximum_iterations=, by a counter in the
    condition, or unbounded (a contraction; no array grows then)."""
    tf, t, d = b.tf, b.t, b.d
    bound = b.pick("max_iter", "counter", "unbounded")
    dynamic_ta = bound != "unbounded" and b.chance(0.5)
    u = b.var("u", (d,))
    threshold = float(b.r.uniform(0.05, 0.6))
    b.tag(f"while_{bound}", "ta_dynamic" if dynamic_ta else "ta_fixed")
    b.dynamic = True
    b.parts.append(f"while_loop[{bound}] ta({'dynamic' if dynamic_ta else 'fixed'})")

    def stage(x: Any, n_in: Any, outs: list[Any]) -> Any:
        v0 = tf.reduce_mean(x, 0)
        if bound == "unbounded":
            def cond(i: Any, v: Any) -> Any:
                return tf.reduce_sum(tf.square(v)) > threshold * 1e-2

            def body(i: Any, v: Any) -> Any:
                return i + 1, 0.5 * tf.tanh(v * u + 0.1 * v)
            i, v = tf.while_loop(cond, body, (tf.constant(0), v0 + 1.0))
            outs.extend([v, i])
            return x * tf.reduce_sum(v)
        ta = tf.TensorArray(tf.float32, size=0 if dynamic_ta else t, dynamic_size=dynamic_ta, element_shape=(d,))

        def cond2(i: Any, v: Any, ta: Any) -> Any:
            keep = tf.reduce_sum(tf.abs(v)) > threshold
            return tf.logical_and(i < t, keep) if bound == "counter" else keep

        def body2(i: Any, v: Any, ta: Any) -> Any:
            v = tf.tanh(v * u + x[tf.minimum(i, t - 1)] * 0.3) * 0.8
            return i + 1, v, ta.write(i, v)
        i, v, ta = tf.while_loop(cond2, body2, (tf.constant(0), v0 + 1.0, ta),
                                 maximum_iterations=t if bound == "max_iter" else None)
        outs.extend([ta.stack(), v, i])
        return x + v
    return stage


def _map_fn(b: _Builder) -> Stage:
    tf, d = b.tf, b.d
    kind = b.pick("plain", "signature", "tuple")
    u = b.var("u", (d,))
    b.tag(f"map_fn_{kind}")
    b.parts.append(f"map_fn[{kind}]")

    def stage(x: Any, n_in: Any, outs: list[Any]) -> Any:
        if kind == "plain":
            y = tf.map_fn(lambda row: tf.sin(row * u) + tf.reduce_sum(row), x)
        elif kind == "signature":
            y = tf.map_fn(lambda row: tf.cast(tf.tanh(row * u), tf.float64), x, fn_output_signature=tf.float64)
            y = tf.cast(y, tf.float32)
        else:
            y, k = tf.map_fn(lambda row: (tf.tanh(row * u), tf.argmax(row, output_type=tf.int32)), x,
                             fn_output_signature=(tf.float32, tf.int32))
            outs.append(k)
        outs.append(y)
        return y
    return stage


def _scan(b: _Builder) -> Stage:
    tf, d = b.tf, b.d
    reverse = b.chance(0.3)
    w = b.var("w", (d, d))
    b.tag("scan", *(["scan_reverse"] if reverse else []))
    b.parts.append(f"scan[{'reverse' if reverse else 'forward'}]")

    def stage(x: Any, n_in: Any, outs: list[Any]) -> Any:
        y = tf.scan(lambda a, row: tf.tanh(tf.linalg.matvec(w, row) + a), x, initializer=tf.zeros([d]),
                    reverse=reverse)
        outs.append(y)
        return y
    return stage


def _fold(b: _Builder) -> Stage:
    tf, d = b.tf, b.d
    which = b.pick("foldl", "foldr")
    u = b.var("u", (d,))
    b.tag(which)
    b.parts.append(which)

    def stage(x: Any, n_in: Any, outs: list[Any]) -> Any:
        fold = tf.foldl if which == "foldl" else tf.foldr
        a = fold(lambda a, row: a * 0.9 + tf.tanh(row * u), x, initializer=tf.zeros([d]))
        outs.append(a)
        return x + a
    return stage


def _nested(b: _Builder) -> Stage:
    """A for loop over a for loop: the inner trip count static or the outer counter (triangular)."""
    tf, t, d = b.tf, b.t, b.d
    inner = b.pick("static", "triangular")
    k_inner = int(b.r.integers(2, 4))
    u = b.var("u", (d,))
    b.tag("nested", f"nested_{inner}")
    b.parts.append(f"nested[{inner}]")

    def stage(x: Any, n_in: Any, outs: list[Any]) -> Any:
        acc = tf.TensorArray(tf.float32, size=0, dynamic_size=True, element_shape=())
        rows = tf.TensorArray(tf.float32, size=t, element_shape=(d,))
        n = tf.constant(0)
        for i in tf.range(t):
            h = tf.zeros([d])
            for j in tf.range(i + 1 if inner == "triangular" else k_inner):
                h = tf.tanh(h * u + x[i] * tf.cast(j + 1, tf.float32))
                acc = acc.write(n, tf.reduce_sum(h))
                n += 1
            rows = rows.write(i, h)
        y = rows.stack()
        outs.extend([y, acc.stack()])
        return y
    return stage


def _decoder(b: _Builder) -> Stage:
    """A greedy decoder: dynamic_size arrays of logits and tokens, stopped at EOS or max_len."""
    tf, d = b.tf, b.d
    vocab = int(b.r.integers(3, 6))
    max_len = int(b.r.integers(4, 9))
    emb, out = b.var("emb", (vocab, d), 1.0), b.var("out", (d, vocab), 1.0)
    b.tag("decoder")
    b.dynamic = True
    b.parts.append(f"decoder[vocab {vocab}, max_len {max_len}]")

    def stage(x: Any, n_in: Any, outs: list[Any]) -> Any:
        logits_ta = tf.TensorArray(tf.float32, size=0, dynamic_size=True)
        tokens = tf.TensorArray(tf.int32, size=0, dynamic_size=True)
        h, token = tf.reduce_mean(x, 0), tf.constant(1)
        for i in tf.range(max_len):
            h = tf.tanh(h + tf.gather(emb, token))
            logits = tf.linalg.matvec(out, h, transpose_a=True) + tf.cast(i, tf.float32) * tf.one_hot(0, vocab)
            logits_ta = logits_ta.write(i, logits)
            token = tf.argmax(logits, output_type=tf.int32)
            tokens = tokens.write(i, token)
            if token == 0:
                break
        outs.extend([logits_ta.stack(), tokens.stack(), h])
        return x + h
    return stage


def _array_ops(b: _Builder) -> Stage:
    """TensorArray ops outside loops: split/concat, scatter/gather, unstack/read, size."""
    tf, t, d = b.tf, b.t, b.d
    kind = b.pick("split_concat", "scatter_gather", "unstack_read")
    u = b.var("u", (d,))
    b.tag(f"array_{kind}")
    b.parts.append(f"array[{kind}]")
    cut = int(b.r.integers(1, t))
    picks = [int(k) for k in b.r.permutation(t)[:2]]

    def stage(x: Any, n_in: Any, outs: list[Any]) -> Any:
        y = x * u
        if kind == "split_concat":
            ta = tf.TensorArray(tf.float32, size=2, infer_shape=False).split(y, [cut, t - cut])
            outs.extend([ta.concat(), ta.read(1), ta.size()])
        elif kind == "scatter_gather":
            ta = tf.TensorArray(tf.float32, size=t, element_shape=(d,)).scatter(picks, y[:2])
            outs.extend([ta.gather(picks[::-1]), ta.stack()])  # unset rows stack as zeros
        else:
            ta = tf.TensorArray(tf.float32, size=t).unstack(y)
            ta = ta.write(picks[0], ta.read(picks[1]) * 2.0)  # an overwrite; reads do not clear
            outs.extend([ta.read(picks[1]), ta.stack()])
        return tf.tanh(y)
    return stage


def _keras(b: _Builder) -> Stage:
    """A tf_keras RNN layer (SimpleRNN, GRU, LSTM; return_sequences or not) over x as a batch of one."""
    import tf_keras

    d = b.d
    kind = b.pick("SimpleRNN", "GRU", "LSTM")
    sequences = b.chance(0.5)
    tf_keras.utils.set_random_seed(b.seed)
    layer = getattr(tf_keras.layers, kind)(d, return_sequences=sequences)
    layer(np.zeros((1, b.t, d), np.float32))
    b.variables.extend(layer.trainable_variables)
    b.tag("keras", f"keras_{kind}")
    b.parts.append(f"keras[{kind}{', sequences' if sequences else ''}]")

    def stage(x: Any, n_in: Any, outs: list[Any]) -> Any:
        y = layer(x[None])[0]
        outs.append(y)
        return x + y if sequences else x * y
    return stage


# --- families drawn from a second random stream (see generate): constructs where the importer had real bugs ---


def _branch_write(b: _Builder) -> Stage:
    """A TensorArray written in a run-time ``if`` inside an autograph loop: in one branch only (the filter
    idiom ``if x[i, 0] > thr: ta = ta.write(j, ...); j += 1``) or in both with different values; fixed size
    or ``dynamic_size``."""
    tf, d = b.tf, b.d
    kind = b.pick("filter", "both")
    n_kind = pick_trip_count(b)
    fixed = b.chance(0.5)
    known = True if kind == "filter" and fixed else b.chance(0.6)
    on = b.pick("x", "h")  # the predicate: the input row's first entry or the loop state
    prefix = kind == "filter" and not known  # an element written before the loop (an unknown shape's stack)
    how = b.pick("stack", "stack", "concat", "size")
    w, u = b.var("w", (d, d)), b.var("u", (d,))
    threshold = float(b.r.uniform(-0.6, 0.6))
    b.tag("branch_write", f"branch_write_{kind}", "ta_fixed" if fixed else "ta_dynamic",
          f"shape_{'known' if known else 'unknown'}", f"for_{n_kind}", f"finish_{how}")
    if kind == "filter":
        b.dynamic = True  # the number of rows written is the data's
    b.parts.append(f"branch_write[{kind}, for {n_kind}, if on {on}] ta({'fixed' if fixed else 'dynamic'}, "
                   f"{'known' if known else 'unknown'} shape{', prefix' if prefix else ''}) -> {how}")

    def stage(x: Any, n_in: Any, outs: list[Any]) -> Any:
        n = trip_count(b, n_kind, x, n_in)
        ta = tf.TensorArray(tf.float32, size=(n + 1 if prefix else n) if fixed else 0, dynamic_size=not fixed,
                            element_shape=(d,) if known else None)
        j = tf.constant(0)
        if prefix:
            ta = ta.write(0, tf.reduce_mean(x, 0) * u)
            j = tf.constant(1)
        h = tf.zeros([d])
        for i in tf.range(n):
            h = tf.tanh(tf.linalg.matvec(w, x[i]) + 0.5 * h)
            p = x[i, 0] if on == "x" else tf.reduce_sum(h)
            if kind == "filter":
                if p > threshold:
                    ta = ta.write(j, h * u)
                    j += 1
            else:
                if p > threshold:
                    ta = ta.write(i, h * u)
                else:
                    ta = ta.write(i, tf.square(h) - u)
        outs.extend(_finish_array(b, ta, how, 0))
        outs.extend([h, j])
        return x + h
    return stage


def _branch_fns(b: _Builder, k: int) -> tuple[list[str], bool]:
    """``k`` distinct branch bodies (names of :func:`_branch_body`) and whether one computes in float64."""
    names = ["tanh_sin", "f64_gauss", "softplus", "identity", "norm", "matmul"]
    picked = [names[int(i)] for i in b.r.permutation(len(names))[:k]]
    return picked, "f64_gauss" in picked


def _branch_body(b: _Builder, name: str, v: Any, u: Any, w: Any) -> Any:
    """A branch's value of ``v`` (any shape ending in ``d``): each with other intermediates (ops, dtypes, counts)."""
    tf = b.tf
    if name == "tanh_sin":
        return tf.tanh(v * u) * tf.sin(v)
    if name == "f64_gauss":
        return tf.cast(tf.exp(-tf.square(tf.cast(v, tf.float64))), tf.float32) * u
    if name == "softplus":
        return tf.math.softplus(v) / (1.0 + tf.abs(v * u))
    if name == "identity":
        return v
    if name == "norm":
        return v * u / tf.sqrt(tf.reduce_sum(tf.square(v), -1, keepdims=True) + 1.0)
    return tf.tanh(tf.linalg.matvec(w, v))  # matmul


def _cond_tape(b: _Builder) -> Stage:
    """A run-time ``tf.cond``, autograph ``if`` or ``tf.switch_case`` inside or outside a loop, its branches
    computing different intermediates (op types, dtypes, counts) that the train step's gradient needs."""
    tf, d = b.tf, b.d
    how = b.pick("cond", "if", "switch")
    where = b.pick("outside", "loop", "loop")
    k = int(b.r.integers(2, 4)) if how == "switch" else 2
    names, f64 = _branch_fns(b, k)
    index = b.pick("mod", "argmax", "counter") if how == "switch" else None  # argmax may be out of range: default
    if where == "outside" and index == "counter":
        index = "mod"
    n_kind = pick_trip_count(b) if where == "loop" else None
    nested = how != "switch" and b.chance(0.25)  # a tf.cond in a branch
    w, u = b.var("w", (d, d)), b.var("u", (d,))
    threshold = float(b.r.uniform(-0.5, 0.5))
    b.tag("cond_tape", f"cond_tape_{how}", f"cond_tape_{where}", *(["f64"] if f64 else []),
          *([f"switch_{index}"] if index else []), *(["cond_nested"] if nested else []),
          *([f"for_{n_kind}"] if n_kind else []))
    b.parts.append(f"cond_tape[{how}{' ' + index if index else ''}, {where}"
                   f"{' for ' + n_kind if n_kind else ''}{', nested' if nested else ''}: {', '.join(names)}]")

    def branch(v: Any, pred: Any, idx: Any) -> Any:
        fns = [lambda name=name: _branch_body(b, name, v, u, w) for name in names]
        if how == "switch":
            return tf.switch_case(idx, fns)
        if nested:
            inner = fns[1]
            fns[1] = lambda: tf.cond(tf.reduce_max(v) > 0.0, inner, lambda: tf.sin(v) * u)
        if how == "cond":
            return tf.cond(pred, fns[0], fns[1])
        if pred:
            y = fns[0]()
        else:
            y = fns[1]()
        return y

    def index_of(v: Any, i: Any) -> Any:
        if index == "counter":
            return tf.math.floormod(i, k)
        if index == "argmax":
            return tf.argmax(tf.reshape(v, [-1]), output_type=tf.int32) % (k + 1)  # k: out of range, the default
        return tf.math.floormod(tf.cast(tf.floor(tf.reduce_sum(v) * 3.0), tf.int32), k)

    def stage(x: Any, n_in: Any, outs: list[Any]) -> Any:
        if where == "outside":
            v = tf.matmul(x, w) * 0.5 + u
            y = branch(v, tf.reduce_sum(v) > threshold, index_of(v, None) if index else None)
            outs.append(y)
            return x + y
        n = trip_count(b, n_kind, x, n_in)
        ta = tf.TensorArray(tf.float32, size=n, element_shape=(d,))
        h = tf.zeros([d])
        for i in tf.range(n):
            v = tf.linalg.matvec(w, x[i]) + 0.5 * h + 0.1 * u  # u read whichever branches there are
            h = tf.tanh(branch(v, x[i, 0] + tf.reduce_sum(h) > threshold, index_of(v, i) if index else None))
            ta = ta.write(i, h)
        outs.extend([ta.stack(), h])
        return x + h
    return stage


def _custom_grad(b: _Builder) -> Stage:
    """``tf.custom_gradient`` functions (gradient clipping, reversal, scaling, a straight-through estimator, a
    half gradient of a captured variable, outside loops, or of a second input, the variable read before the
    loop) or ``tf.recompute_grad``, inside or outside a loop."""
    tf, t, d = b.tf, b.t, b.d
    kind = b.pick("clip", "reverse", "scale", "straight_through", "variable", "recompute")
    where = b.pick("outside", "loop")
    n_kind = pick_trip_count(b) if where == "loop" else None
    w, u = b.var("w", (d, d)), b.var("u", (d,))
    c = float(b.r.uniform(0.05, 0.5))
    b.tag("custom_grad", f"custom_grad_{kind}", f"custom_grad_{where}", *([f"for_{n_kind}"] if n_kind else []))
    b.parts.append(f"custom_grad[{kind}, {where}{' for ' + n_kind if n_kind else ''}, c={c:.3f}]")

    @tf.custom_gradient
    def clip(v: Any) -> Any:
        y = tf.tanh(v)

        def grad(dy: Any) -> Any:
            return tf.clip_by_value(dy * (1.0 - y * y), -c, c)
        return y, grad

    @tf.custom_gradient
    def reverse(v: Any) -> Any:
        return tf.identity(v), lambda dy: -c * dy

    @tf.custom_gradient
    def scale(v: Any) -> Any:
        y = tf.sin(v)

        def grad(dy: Any) -> Any:
            return dy * tf.cos(v) * (1.0 + c)
        return y, grad

    @tf.custom_gradient
    def straight_through(v: Any) -> Any:
        return tf.round(v * 2.0) / 2.0, lambda dy: dy

    @tf.custom_gradient
    def variable(v: Any) -> Any:  # reads w: the gradient function gets the variables
        y = tf.linalg.matvec(w, v)

        def grad(dy: Any, variables: Any = None) -> Any:
            gv = tf.linalg.matvec(w, dy, transpose_a=True)
            gw = 0.5 * dy[:, None] * v[None, :]
            return gv, [gw for _ in variables or ()]
        return y, grad

    @tf.custom_gradient
    def two_inputs(v: Any, wt: Any) -> Any:  # a loop's variable read before it (TensorFlow's own tape fails on a
        y = tf.linalg.matvec(wt, v)  # custom gradient that reads a variable inside a while loop)

        def grad(dy: Any) -> Any:
            return tf.linalg.matvec(wt, dy, transpose_a=True), 0.5 * dy[:, None] * v[None, :]
        return y, grad

    recompute = tf.recompute_grad(lambda v: tf.tanh(v * u) * 2.0)
    recompute_in_loop = tf.recompute_grad(lambda v, s: tf.tanh(v * s) * 2.0)  # u read before the loop (as above)
    fn = {"clip": clip, "reverse": reverse, "scale": scale, "straight_through": straight_through,
          "variable": variable, "recompute": recompute}[kind]

    def stage(x: Any, n_in: Any, outs: list[Any]) -> Any:
        if where == "outside":
            y = tf.stack([fn(tf.linalg.matvec(w, x[i]) * u) for i in range(t)]) if kind == "variable" \
                else fn(tf.matmul(x, w) * u)
            outs.append(y)
            return x + y
        n = trip_count(b, n_kind, x, n_in)
        ta = tf.TensorArray(tf.float32, size=n, element_shape=(d,))
        h = tf.zeros([d])
        wt, ut = tf.convert_to_tensor(w), tf.convert_to_tensor(u)
        for i in tf.range(n):
            v = (x[i] + 0.5 * h) * u if kind == "variable" else tf.linalg.matvec(w, x[i]) * u + 0.5 * h
            h = 0.8 * tf.tanh(two_inputs(v, wt) if kind == "variable" else recompute_in_loop(v, ut)
                              if kind == "recompute" else fn(v))
            ta = ta.write(i, h)
        outs.extend([ta.stack(), h])
        return x + h
    return stage


def _stop_grad(b: _Builder) -> Stage:
    """Part of a computation kept from the gradient: ``tf.stop_gradient`` (outside or inside a loop),
    ``tape.stop_recording()`` in the train step (``tf.stop_gradient`` in the forward, the same gradient), a
    ``tf.while_loop(back_prop=False)``."""
    tf, t, d = b.tf, b.t, b.d
    kind = b.pick("stop_gradient", "stop_recording", "while_no_backprop", "stop_in_loop")
    n_kind = pick_trip_count(b) if kind == "stop_in_loop" else None
    w, u = b.var("w", (d, d)), b.var("u", (d,))
    b.tag("stop_grad", f"stop_grad_{kind}", *([f"for_{n_kind}"] if n_kind else []))
    if kind == "while_no_backprop":
        b.dynamic = True
    b.parts.append(f"stop_grad[{kind}{' for ' + n_kind if n_kind else ''}]")

    def stage(x: Any, n_in: Any, outs: list[Any]) -> Any:
        y = x * u
        if kind in ("stop_gradient", "stop_recording"):
            if kind == "stop_recording" and b.tape is not None:
                with b.tape.stop_recording():
                    z = tf.tanh(tf.matmul(y, w))
            else:
                z = tf.stop_gradient(tf.tanh(tf.matmul(y, w)))
            out = y * z + tf.matmul(x, w)
            outs.append(out)
            return out
        if kind == "while_no_backprop":
            def body(i: Any, v: Any, ta: Any) -> Any:
                v = tf.tanh(tf.linalg.matvec(w, v) + x[tf.minimum(i, t - 1)])
                return i + 1, v, ta.write(i, v * u)
            ta = tf.TensorArray(tf.float32, size=t, element_shape=(d,))
            i, v, ta = tf.while_loop(lambda i, v, ta: tf.reduce_sum(v) < 2.0, body, (tf.constant(0), tf.zeros([d]), ta),
                                     maximum_iterations=t, back_prop=False)
            outs.extend([v, i, ta.stack()])
            return y + v
        n = trip_count(b, n_kind, x, n_in)
        ta = tf.TensorArray(tf.float32, size=n, element_shape=(d,))
        h = tf.zeros([d])
        for i in tf.range(n):
            h = tf.tanh(tf.linalg.matvec(w, x[i]) + tf.stop_gradient(h) * u)
            ta = ta.write(i, h + tf.stop_gradient(h * h))
        outs.extend([ta.stack(), h])
        return y + h
    return stage


def _known_failing(b: _Builder) -> Stage:
    """Constructs of known failing classes (off by default, ``JTA_TF2_KNOWN_FAILING=1``): ``TensorArray.split``
    and ``concat`` inside loops, ``infer_shape=False`` arrays, ``tf.gather`` / ``tf.where`` inside loops."""
    tf, t, d = b.tf, b.t, b.d
    kind = b.pick("split_in_loop", "concat_in_loop", "infer_shape_false", "gather_in_loop", "where_in_loop",
                  "where_select_in_loop")
    n_kind = pick_trip_count(b)
    w, u = b.var("w", (d, d)), b.var("u", (d,))
    cut = int(b.r.integers(1, d))
    b.tag("known_failing", f"kf_{kind}", f"for_{n_kind}")
    b.parts.append(f"known_failing[{kind}, for {n_kind}]")

    def stage(x: Any, n_in: Any, outs: list[Any]) -> Any:
        n = trip_count(b, n_kind, x, n_in)
        h = tf.zeros([d])
        out = tf.TensorArray(tf.float32, size=0, dynamic_size=True, infer_shape=kind != "infer_shape_false")
        for i in tf.range(n):
            v = tf.tanh(tf.linalg.matvec(w, x[i]) + 0.5 * h)
            if kind == "split_in_loop":
                parts = tf.TensorArray(tf.float32, size=2, infer_shape=False).split(v * u, [cut, d - cut])
                h = tf.reshape(tf.concat([parts.read(1) * 2.0, parts.read(0)], 0), [d])
                out = out.write(i, parts.concat())
            elif kind == "concat_in_loop":
                out = out.write(i, v * u)
                h = v + 0.1 * tf.reduce_sum(out.concat())
            elif kind == "infer_shape_false":
                h = v * u
                out = out.write(i, h[: (i % d) + 1])
            elif kind == "gather_in_loop":
                h = tf.gather(v * u, tf.math.floormod(tf.range(d) + i, d)) + tf.gather(x, tf.minimum(i + 1, t - 1))
                out = out.write(i, h)
            elif kind == "where_in_loop":
                idx = tf.where(v > 0.0)
                h = v * u + tf.reduce_sum(tf.gather_nd(v, idx))
                out = out.write(i, h)
            else:
                h = tf.where(v > 0.0, v * u, tf.sin(v))
                out = out.write(i, h)
        outs.extend([out.concat() if kind == "infer_shape_false" else out.stack(), h])
        return x + h
    return stage


STAGES: dict[str, Callable[[_Builder], Stage]] = {
    "for": _for_loop, "while": _while, "map_fn": _map_fn, "scan": _scan, "fold": _fold,
    "nested": _nested, "decoder": _decoder, "array": _array_ops, "keras": _keras}
WEIGHTS = {"for": 5, "while": 2, "map_fn": 1, "scan": 1, "fold": 1, "nested": 1, "decoder": 1, "array": 1,
           "keras": 1}

# The families of constructs where the importer had real bugs, drawn from a second random stream (the seed's
# programs of the stages above are unchanged by them: same stages, variables and arguments; a program may get
# one of these stages more, at a random place). ``known_failing`` (classes that fail today) has weight 0 unless
# the environment sets JTA_TF2_KNOWN_FAILING=1. Adding a family changes which family (and where) a seed's extra
# stage is, never whether it gets one nor its other stages (``counter_write``, ``masked_rows`` and
# ``nested_growth``, in tests/helpers/tf2_generator_extra.py, changed the extra stage of 81 of seeds 0-199;
# ``grown_tensor``, in tests/helpers/tf2_generator_grow.py, that of 52).
EXTRA_STAGES: dict[str, Callable[[_Builder], Stage]] = {
    "branch_write": _branch_write, "cond_tape": _cond_tape, "custom_grad": _custom_grad, "stop_grad": _stop_grad,
    "known_failing": _known_failing, **tf2_generator_extra.STAGES, **tf2_generator_grow.STAGES}
EXTRA_WEIGHTS = {"branch_write": 3, "cond_tape": 3, "custom_grad": 3, "stop_grad": 2,
                 "known_failing": 3 if os.environ.get("JTA_TF2_KNOWN_FAILING") == "1" else 0,
                 **tf2_generator_extra.WEIGHTS, "grown_tensor": 2}
EXTRA_CHANCE = 0.5  # of a program getting one extra stage


def generate(seed: int, extras: bool = True) -> Program:
    """The program of ``seed`` (the same seed gives the same program); ``extras=False``: without the stage
    of :data:`EXTRA_STAGES` it may get (the program the seed gave before those families existed)."""
    b = _Builder(seed)
    tf = b.tf
    names = list(STAGES)
    p = np.array([WEIGHTS[n] for n in names], float)
    stages = [STAGES[names[int(b.r.choice(len(names), p=p / p.sum()))]](b) for _ in range(int(b.r.integers(1, 4)))]
    x = b.r.normal(size=(b.t, b.d)).astype(np.float32)
    r = b.r
    b.r = np.random.default_rng([seed, 0x7F2])  # the extra families' stream
    forced = [n for n in os.environ.get("JTA_TF2_EXTRA", "").split(",") if n]  # families every program gets
    assert set(forced) <= set(EXTRA_STAGES), f"JTA_TF2_EXTRA: not families of EXTRA_STAGES: {forced}"
    if extras and (b.chance(EXTRA_CHANCE) or forced):
        extra = forced or [n for n in EXTRA_STAGES if EXTRA_WEIGHTS[n]]
        q = np.array([EXTRA_WEIGHTS[n] or 1 for n in extra], float)
        where = int(b.r.integers(len(stages) + 1))
        if forced and os.environ.get("JTA_TF2_EXTRA_ONLY") == "1":  # the extra stage alone, its draws the same
            stages, where, b.variables, b.tags, b.parts, b.n_arg, b.dynamic = [], 0, [], set(), [], False, False
        stages.insert(where, EXTRA_STAGES[extra[int(b.r.choice(len(extra), p=q / q.sum()))]](b))
        if where < len(stages) - 1:  # the description in the program's order
            b.parts.insert(where, b.parts.pop())
    b.r = r
    args: tuple[Any, ...] = (x, np.int32(b.r.integers(1, b.t + 1))) if b.n_arg else (x,)

    def forward(x: Any, n: Any = None) -> Any:
        outs: list[Any] = []
        for stage in stages:
            x = stage(x, n, outs)
        outs.append(x)
        return tuple(outs)

    signature = [tf.TensorSpec(np.shape(a), tf.as_dtype(np.asarray(a).dtype)) for a in args]
    variables = list(b.variables)

    @tf.function(input_signature=signature)
    def train(*a: Any) -> Any:
        with tf.GradientTape() as tape:
            b.tape = tape
            try:
                outs = forward(*a)
            finally:
                b.tape = None
            loss = tf.add_n([tf.reduce_sum(tf.square(tf.cast(o, tf.float32))) for o in outs if o.dtype.is_floating])
        grads = tape.gradient(loss, variables, unconnected_gradients=tf.UnconnectedGradients.ZERO)
        return loss, [tf.convert_to_tensor(g) for g in grads]

    description = f"T={b.t} D={b.d}{' n=' + str(int(args[1])) if b.n_arg else ''}: " + " ; ".join(b.parts)
    return Program(seed, description, frozenset(b.tags), tf.function(forward, input_signature=signature), train,
                   variables, args, b.dynamic)

if __name__ == "__main__":
    for s in sys.argv[1:] or ["0"]:
        prog = generate(int(s))
        print(f"{s}: {prog.description}\n   tags: {sorted(prog.tags)}")
