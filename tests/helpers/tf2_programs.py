"""The eight TF2 programs of issue 28, each as a forward ``tf.function`` and a train step.

Each builder returns a :class:`Program`: the forward ``tf.function``, a train step that takes a tape
gradient inside the ``tf.function`` (returning the loss and the gradients of every variable), the
variables, and example arguments. Sizes are small: the tests compare values against TensorFlow.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import numpy as np
import tensorflow as tf


@dataclasses.dataclass
class Program:
    name: str
    forward: Any
    train: Any
    variables: list[Any]
    args: tuple[Any, ...]


def _train(forward: Callable[..., Any], variables: list[Any], signature: Any) -> Any:
    """``forward``'s train step: the loss (sum of squares of the outputs) and its tape gradients."""
    @tf.function(input_signature=signature)
    def train(*args: Any) -> Any:
        with tf.GradientTape() as tape:
            out = forward(*args)
            loss = tf.add_n([tf.reduce_sum(tf.square(tf.cast(o, tf.float32)))
                             for o in tf.nest.flatten(out) if o.dtype.is_floating])
        return loss, tape.gradient(loss, variables)
    return train


def _program(name: str, forward: Callable[..., Any], variables: list[Any], args: tuple[Any, ...]) -> Program:
    signature = [tf.TensorSpec(np.shape(a), tf.as_dtype(np.asarray(a).dtype)) for a in args]
    fn = tf.function(forward, input_signature=signature)
    return Program(name, fn, _train(forward, variables, signature), variables, args)


def _rng(seed: int) -> np.random.Generator:
    return np.random.default_rng(seed)


def autograph_loop(seed: int = 0, t: int = 5, d: int = 3) -> Program:
    r = _rng(seed)
    w = tf.Variable(r.normal(size=(d, d)).astype(np.float32) * 0.5, name="w")

    def forward(x: Any) -> Any:
        n = tf.shape(x)[0]
        ta = tf.TensorArray(tf.float32, size=n)
        h = tf.zeros([d])
        for i in tf.range(n):
            h = tf.tanh(tf.linalg.matvec(w, x[i]) + h)
            ta = ta.write(i, h)
        return ta.stack()
    return _program("autograph_loop", forward, [w], (r.normal(size=(t, d)).astype(np.float32),))


def map_fn(seed: int = 0, t: int = 4, d: int = 3) -> Program:
    r = _rng(seed)
    w = tf.Variable(r.normal(size=(d,)).astype(np.float32), name="w")

    def forward(x: Any) -> Any:
        return tf.map_fn(lambda row: tf.sin(row * w) + tf.reduce_sum(row), x)
    return _program("map_fn", forward, [w], (r.normal(size=(t, d)).astype(np.float32),))


def scan(seed: int = 0, t: int = 6, d: int = 2) -> Program:
    r = _rng(seed)
    w = tf.Variable(r.normal(size=(d,)).astype(np.float32) * 0.7, name="w")

    def forward(x: Any) -> Any:
        return tf.scan(lambda acc, row: tf.tanh(acc * w + row), x, initializer=tf.zeros([d]))
    return _program("scan", forward, [w], (r.normal(size=(t, d)).astype(np.float32),))


def early_exit(seed: int = 0) -> Program:
    r = _rng(seed)
    w = tf.Variable(np.float32(0.8), name="w")

    def forward(x: Any) -> Any:
        ta = tf.TensorArray(tf.float32, size=0, dynamic_size=True, element_shape=())

        def cond(i: Any, v: Any, prev: Any, ta: Any) -> Any:
            return tf.abs(v - prev) > 1e-3

        def body(i: Any, v: Any, prev: Any, ta: Any) -> Any:
            return i + 1, tf.cos(w * v), v, ta.write(i, v)
        i, v, _, ta = tf.while_loop(cond, body, (0, x, x - 1.0, ta), maximum_iterations=50)
        return tf.reduce_sum(ta.stack()) + v, i
    return _program("early_exit", forward, [w], (np.float32(r.uniform(0.5, 1.0)),))


def _keras_rnn(kind: str, seed: int, t: int, batch: int, units: int) -> Program:
    import tf_keras

    tf_keras.utils.set_random_seed(seed)
    layer = getattr(tf_keras.layers, kind)(units, return_sequences=True)
    x = _rng(seed).normal(size=(batch, t, 3)).astype(np.float32)
    layer(x)
    return _program(kind.lower(), lambda x: layer(x), list(layer.trainable_variables), (x,))


def lstm(seed: int = 0, t: int = 5, batch: int = 2, units: int = 4) -> Program:
    return _keras_rnn("LSTM", seed, t, batch, units)


def gru(seed: int = 0, t: int = 5, batch: int = 2, units: int = 4) -> Program:
    return _keras_rnn("GRU", seed, t, batch, units)


def greedy_decoder(seed: int = 0, vocab: int = 5, d: int = 4, max_len: int = 8) -> Program:
    r = _rng(seed)
    emb = tf.Variable(r.normal(size=(vocab, d)).astype(np.float32), name="emb")
    out = tf.Variable(r.normal(size=(d, vocab)).astype(np.float32), name="out")
    eos = 0

    def forward(h0: Any) -> Any:
        logits_ta = tf.TensorArray(tf.float32, size=0, dynamic_size=True)
        h, token = h0, tf.constant(1)
        for i in tf.range(max_len):
            h = tf.tanh(h + tf.gather(emb, token))
            # EOS (token 0) gains a little each step, so the decoder stops before max_len
            logits = tf.linalg.matvec(out, h, transpose_a=True) + tf.cast(i, tf.float32) * tf.one_hot(eos, vocab)
            logits_ta = logits_ta.write(i, logits)
            token = tf.argmax(logits, output_type=tf.int32)
            if token == eos:
                break
        return logits_ta.stack()
    return _program("greedy_decoder", forward, [emb, out], (r.normal(size=(d,)).astype(np.float32),))


def array_ops(seed: int = 0, d: int = 2) -> Program:
    r = _rng(seed)
    w = tf.Variable(r.normal(size=(d,)).astype(np.float32), name="w")

    def forward(x: Any) -> Any:  # x: (6, d)
        ta = tf.TensorArray(tf.float32, size=3, infer_shape=False).split(x * w, [1, 2, 3])
        joined = ta.concat()
        tb = tf.TensorArray(tf.float32, size=4, element_shape=(d,)).scatter([3, 0], x[:2] * w)
        picked = tb.gather([0, 3, 1])
        return joined, picked, tb.stack()
    return _program("array_ops", forward, [w], (r.normal(size=(6, d)).astype(np.float32),))


PROGRAMS: dict[str, Callable[..., Program]] = {
    f.__name__: f for f in (autograph_loop, map_fn, scan, early_exit, lstm, gru, greedy_decoder, array_ops)}


# -- more Keras: SimpleRNN, Bidirectional, stacked layers, Keras 3 (TensorFlow backend) ----------
def _layer_program(name: str, make: Callable[[Any], Any], seed: int, t: int = 5, batch: int = 2) -> Program:
    x = _rng(seed).normal(size=(batch, t, 3)).astype(np.float32)
    layer = make(seed)
    layer(x)
    return _program(name, lambda x: layer(x), list(layer.trainable_variables), (x,))


def _tf_keras(seed: int) -> Any:
    import tf_keras

    tf_keras.utils.set_random_seed(seed)
    return tf_keras


def _keras3(seed: int) -> Any:
    import keras

    keras.utils.set_random_seed(seed)
    return keras


def simple_rnn(seed: int = 0) -> Program:
    return _layer_program("simple_rnn", lambda s: _tf_keras(s).layers.SimpleRNN(4, return_sequences=True), seed)


def bidirectional_lstm(seed: int = 0) -> Program:
    def make(s: int) -> Any:
        layers = _tf_keras(s).layers
        return layers.Bidirectional(layers.LSTM(4, return_sequences=True))
    return _layer_program("bidirectional_lstm", make, seed)


def stacked(seed: int = 0) -> Program:
    def make(s: int) -> Any:
        k = _tf_keras(s)
        return k.Sequential([k.layers.GRU(4, return_sequences=True), k.layers.LSTM(3)])
    return _layer_program("stacked", make, seed)


def keras3_lstm(seed: int = 0) -> Program:
    return _layer_program("keras3_lstm", lambda s: _keras3(s).layers.LSTM(4, return_sequences=True), seed)


def keras3_bidirectional_gru(seed: int = 0) -> Program:
    def make(s: int) -> Any:
        layers = _keras3(s).layers
        return layers.Bidirectional(layers.GRU(4))
    return _layer_program("keras3_bidirectional_gru", make, seed)


def seq2seq(seed: int = 0, vocab: int = 6, d: int = 4, units: int = 8, t: int = 5, max_len: int = 7) -> Program:
    """A tf_keras LSTM encoder and a greedy decoder (an LSTMCell, dot attention over the encoder's
    outputs, a Dense to the vocabulary) run by a tf.while_loop until every row has emitted token 1 or
    ``max_len`` steps, its logits in a dynamic_size TensorArray: its length is the data's."""
    k = _tf_keras(seed)
    r = _rng(seed)
    emb = tf.Variable(r.normal(size=(vocab, d)).astype(np.float32) * 0.5, name="emb")
    encoder = k.layers.LSTM(units, return_sequences=True, return_state=True)
    cell, dense = k.layers.LSTMCell(units), k.layers.Dense(vocab)
    encoder(tf.zeros([1, t, d]))
    cell(tf.zeros([1, d]), [tf.zeros([1, units])] * 2)
    dense(tf.zeros([1, 2 * units]))

    def forward(src: Any) -> Any:  # (batch, steps, vocab)
        seq, h, c = encoder(tf.nn.embedding_lookup(emb, src))
        done0 = tf.zeros([tf.shape(src)[0]], tf.bool)

        def go_on(i: Any, tok: Any, h: Any, c: Any, ta: Any, done: Any) -> Any:
            return tf.logical_and(i < max_len, tf.logical_not(tf.reduce_all(done)))

        def step(i: Any, tok: Any, h: Any, c: Any, ta: Any, done: Any) -> Any:
            o, (h, c) = cell(tf.nn.embedding_lookup(emb, tok), [h, c])
            attention = tf.nn.softmax(tf.einsum("bh,bth->bt", o, seq))
            logits = dense(tf.concat([o, tf.einsum("bt,bth->bh", attention, seq)], -1))
            tok = tf.argmax(logits, -1, output_type=tf.int32)
            return i + 1, tok, h, c, ta.write(i, logits), tf.logical_or(done, tok == 1)
        ta = tf.TensorArray(tf.float32, size=0, dynamic_size=True)
        _, _, _, _, ta, _ = tf.while_loop(go_on, step, (0, tf.zeros_like(done0, tf.int32), h, c, ta, done0))
        return tf.transpose(ta.stack(), [1, 0, 2])
    variables = [emb, *encoder.trainable_variables, *cell.trainable_variables, *dense.trainable_variables]
    return _program("seq2seq", forward, variables, (r.integers(0, vocab, size=(2, t)).astype(np.int32),))


KERAS: dict[str, Callable[..., Program]] = {
    f.__name__: f for f in (simple_rnn, bidirectional_lstm, stacked, keras3_lstm, keras3_bidirectional_gru, seq2seq)}


# -- nested loops: a tape's accumulators of an inner loop's lists are lists of lists -------------
def nested_triangular(seed: int = 0, t: int = 3) -> Program:
    """map_fn over scan, then a loop whose inner trip count is the outer counter (unrolled)."""
    r = _rng(seed)
    w = tf.Variable(r.normal(size=(2,)).astype(np.float32) * 0.5, name="w")

    def forward(x: Any) -> Any:  # (t, 4, 2)
        inner = tf.map_fn(lambda m: tf.scan(lambda a, row: tf.tanh(a * w + row), m, initializer=tf.zeros([2])), x)
        n = tf.constant(0)
        acc = tf.TensorArray(tf.float32, size=0, dynamic_size=True)
        for i in tf.range(t):
            for j in tf.range(i + 1):
                acc = acc.write(n, tf.reduce_sum(inner[i, j] * w))
                n += 1
        return inner, acc.stack()
    return _program("nested_triangular", forward, [w], (r.normal(size=(t, 4, 2)).astype(np.float32),))


def nested_scan(seed: int = 0, t: int = 70) -> Program:
    """A scan of scans: the outer loop is longer than what is unrolled, so its carry holds lists of lists."""
    r = _rng(seed)
    w = tf.Variable(r.normal(size=(2,)).astype(np.float32) * 0.5, name="w")

    def forward(x: Any) -> Any:
        return tf.map_fn(lambda m: tf.scan(lambda a, row: tf.tanh(a * w + row), m, initializer=tf.zeros([2])), x)
    return _program("nested_scan", forward, [w], (r.normal(size=(t, 3, 2)).astype(np.float32),))


NESTED: dict[str, Callable[..., Program]] = {f.__name__: f for f in (nested_triangular, nested_scan)}


# -- conds in loops and loop variables that change shape ----------------------------------------
def cond_in_loop(seed: int = 0, t: int = 70) -> Program:
    """An autograph ``if`` on the data inside a loop: the tape hands the cond's intermediates to its
    gradient as optionals, accumulated per step (``t`` past what is unrolled: a scan)."""
    r = _rng(seed)
    w = tf.Variable(r.normal(size=(3,)).astype(np.float32), name="w")

    def forward(x: Any) -> Any:
        out = tf.TensorArray(tf.float32, size=0, dynamic_size=True)
        s = tf.zeros([3])
        for i in tf.range(tf.shape(x)[0]):
            if tf.reduce_sum(x[i]) > 0:
                s = tf.tanh(s + x[i] * w)
                out = out.write(i, s)
            else:
                s = s * 0.5
                out = out.write(i, -s)
        return out.stack(), s
    return _program("cond_in_loop", forward, [w], (r.normal(size=(t, 3)).astype(np.float32),))


def shape_invariant(seed: int = 0) -> Program:
    """A loop variable that grows (``shape_invariants``): the loop is unrolled."""
    r = _rng(seed)
    w = tf.Variable(r.normal(size=(3,)).astype(np.float32), name="w")

    def forward(x: Any) -> Any:
        i0, acc = tf.constant(0), tf.zeros([0, 3])
        _, acc = tf.while_loop(lambda i, a: i < 3, lambda i, a: (i + 1, tf.concat([a, x[i:i + 1] * w], 0)),
                               (i0, acc), shape_invariants=(i0.shape, tf.TensorShape([None, 3])))
        return acc
    return _program("shape_invariant", forward, [w], (r.normal(size=(5, 3)).astype(np.float32),))


MORE: dict[str, Callable[..., Program]] = {f.__name__: f for f in (cond_in_loop, shape_invariant)}


# -- regressions of the random programs (tests/test_tf2_programs.py): one per class of mismatch ----
def nested_growth(seed: int = 0) -> Program:
    """A dynamic_size array written in a static loop inside a static loop: the inner loop must not grow
    the buffer the outer one sized (its carry would change shape: lax.scan's TypeError)."""
    r = _rng(seed)
    u = tf.Variable(r.normal(size=(2,)).astype(np.float32), name="u")

    def forward(x: Any) -> Any:  # (4, 2)
        acc = tf.TensorArray(tf.float32, size=0, dynamic_size=True, element_shape=())
        n = tf.constant(0)
        for i in tf.range(4):
            h = tf.zeros([2])
            for j in tf.range(2):
                h = tf.tanh(h * u + x[i] * tf.cast(j + 1, tf.float32))
                acc = acc.write(n, tf.reduce_sum(h))
                n += 1
        return acc.stack()
    return _program("nested_growth", forward, [u], (r.normal(size=(4, 2)).astype(np.float32),))


def inner_bounded_growth(seed: int = 0) -> Program:
    """An inner tf.while_loop with maximum_iterations= and a data-dependent condition pushes into a list
    of the outer loop: the outer buffer gets the inner bound's rows per step (not one)."""
    r = _rng(seed)
    u = tf.Variable(r.normal(size=(2,)).astype(np.float32) * 0.5, name="u")

    def forward(x: Any) -> Any:  # (3, 2)
        acc = tf.TensorArray(tf.float32, size=0, dynamic_size=True, element_shape=(2,))
        n = tf.constant(0)
        for i in tf.range(3):
            def cond(k: Any, v: Any, n: Any, acc: Any) -> Any:
                return tf.reduce_sum(tf.abs(v)) > 0.3

            def body(k: Any, v: Any, n: Any, acc: Any) -> Any:
                v = tf.tanh(v * u) * 0.9
                return k + 1, v, n + 1, acc.write(n, v)
            _, _, n, acc = tf.while_loop(cond, body, (0, x[i] + 1.0, n, acc), maximum_iterations=3)
        return acc.stack()
    return _program("inner_bounded_growth", forward, [u], (r.normal(size=(3, 2)).astype(np.float32),))


def minimum_bound(seed: int = 0) -> Program:
    """A trip count and a TensorArray size of tf.minimum(n, 4), n an argument: bounded by 4, so under jit
    a lax.scan of 4 steps and a buffer of 4 rows (the stack and the concat padded)."""
    r = _rng(seed)
    w = tf.Variable(r.normal(size=(2, 2)).astype(np.float32) * 0.5, name="w")

    def forward(x: Any, n: Any) -> Any:  # (4, 2), n
        m = tf.minimum(n, 4)
        ta = tf.TensorArray(tf.float32, size=m)  # an unknown element shape: the buffer waits for the loop
        grow = tf.TensorArray(tf.float32, size=0, dynamic_size=True, element_shape=(2,))
        h = tf.zeros([2])
        for i in tf.range(m):
            h = tf.tanh(tf.linalg.matvec(w, x[i]) + h)
            ta = ta.write(i, h)
            grow = grow.write(i, 2.0 * h)
        return ta.stack(), grow.concat(), h
    return _program("minimum_bound", forward, [w], (r.normal(size=(4, 2)).astype(np.float32), np.int32(3)))


def zero_trips(seed: int = 0) -> Program:
    """A loop whose static trip count is 0 (tf.range of a shape difference) over a growing array."""
    r = _rng(seed)
    u = tf.Variable(r.normal(size=(2,)).astype(np.float32), name="u")

    def forward(x: Any) -> Any:  # (4, 2)
        ta = tf.TensorArray(tf.float32, size=0, dynamic_size=True, element_shape=(2,))
        for i in tf.range(tf.shape(x)[0] - 4):
            ta = ta.write(i, x[i] * u)
        return ta.stack(), tf.reduce_sum(x * u)
    return _program("zero_trips", forward, [u], (r.normal(size=(4, 2)).astype(np.float32),))


def ragged_split(seed: int = 0) -> Program:
    """A TensorArray split into pieces of different lengths, one piece read: the tape's AddN of the
    gradient lists sums them element by element (the read's list sets one element)."""
    r = _rng(seed)
    u = tf.Variable(r.normal(size=(2,)).astype(np.float32), name="u")

    def forward(x: Any) -> Any:  # (5, 2)
        ta = tf.TensorArray(tf.float32, size=2, infer_shape=False).split(x * u, [1, 4])
        return ta.concat(), ta.read(1) * 3.0
    return _program("ragged_split", forward, [u], (r.normal(size=(5, 2)).astype(np.float32),))


def bounded_read_grad(seed: int = 0) -> Program:
    """A TensorArray of tf.minimum(n, 4) elements read in the loop: the read's gradient reserves a list as
    long as the array, a length the tape pushes in the forward loop and pops in the gradient loop (under
    jit a run-time length whose bound the tape keeps)."""
    r = _rng(seed)
    w = tf.Variable(r.normal(size=(2, 2)).astype(np.float32) * 0.5, name="w")

    def forward(x: Any, n: Any) -> Any:  # (4, 2), n
        m = tf.minimum(n, 4)
        ta = tf.TensorArray(tf.float32, size=m, element_shape=(2,))
        h = tf.zeros([2])
        for i in tf.range(m):
            ta = ta.write(i, tf.tanh(tf.linalg.matvec(w, x[i]) + h))
            h = ta.read(i) * 0.5 + h
        return ta.stack(), h
    return _program("bounded_read_grad", forward, [w], (r.normal(size=(4, 2)).astype(np.float32), np.int32(3)))


REGRESSIONS: dict[str, Callable[..., Program]] = {
    f.__name__: f for f in (nested_growth, inner_bounded_growth, minimum_bound, zero_trips, ragged_split,
                            bounded_read_grad)}
