"""Frozen TF1 GraphDefs (control flow v1, TensorArrays, stacks) with TF's results, for ``jta.import_graph_def``.

Each builder makes one small graph in mode K (:func:`tests.helpers.tfgraph.k_graph`), adds
``loss = sum(forward * fixed weights)`` and ``tf.gradients(loss, float inputs)``, freezes it and
runs it once in a Session. TensorFlow is imported inside the builders only.

RNN cells are duck-typed (:class:`_LSTM`, :class:`_GRU`): under Keras 3 ``tf.compat.v1.nn.rnn_cell.LSTMCell``
raises ``AttributeError`` even with ``tf_keras`` installed, unless ``TF_USE_LEGACY_KERAS=1`` is set
before TensorFlow is first imported, which a shared test process cannot promise. ``dynamic_rnn``
only needs ``state_size``, ``output_size``, ``zero_state`` and ``__call__``.

``python -m tests.helpers.graph_corpus`` prints each case's nodes, op types and Session.run time.
"""

from __future__ import annotations

import collections
import dataclasses
import functools
import statistics
import time
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from tests.helpers.tfgraph import k_graph

# The op types of interest for the importer (the table and the tests report these).
OPS_OF_INTEREST = (
    "TensorArrayV3", "TensorArrayGradV3", "TensorArrayGradWithShape", "TensorArrayWriteV3", "TensorArrayReadV3",
    "TensorArrayGatherV3", "TensorArrayScatterV3", "TensorArrayConcatV3", "TensorArraySplitV3", "TensorArraySizeV3",
    "TensorArrayCloseV3", "StackV2", "StackPushV2", "StackPopV2", "Enter", "Exit", "Merge", "Switch",
    "NextIteration", "LoopCond",
)
_LOOP_OPS = ("Enter", "Exit", "Merge", "Switch", "NextIteration", "LoopCond")
_GRAD_OPS = ("TensorArrayGradV3", "StackV2", "StackPushV2", "StackPopV2")
# Variable ops that must not survive freezing.
_VARIABLE_OPS = ("VarHandleOp", "VariableV2", "ReadVariableOp", "AssignVariableOp", "VarIsInitializedOp")


@dataclasses.dataclass(frozen=True)
class GraphCase:
    """One frozen graph, its feeds and what TensorFlow's Session returns for them."""

    name: str
    graph_def: Any  # frozen tf GraphDef: no variables, gradients included
    inputs: list[str]  # placeholder tensor names, in feed order
    outputs: list[str]  # forward outputs (outputs[0] is the scalar loss), then the gradients
    n_forward: int
    feeds: list[np.ndarray]
    expected: list[np.ndarray]
    session_seconds: float  # median Session.run wall time after one warm-up run
    rtol: float
    grad_inputs: list[int]  # outputs[n_forward + k] is d loss / d inputs[grad_inputs[k]]
    op_counts: dict[str, int]
    claims: tuple[str, ...]  # op types this case is meant to contain (checked by tests/test_graph_corpus.py)

    @property
    def n_nodes(self) -> int:
        return len(self.graph_def.node)

    def feed_dict(self) -> dict[str, np.ndarray]:
        return dict(zip(self.inputs, self.feeds, strict=True))


def _np_dtype(dtype: Any) -> Any:
    return np.dtype(dtype.as_numpy_dtype)


class _Cell:
    """Duck-typed RNN cell: weights are numpy constants, or resource variables (frozen later)."""

    def __init__(self, n_in: int, n_hidden: int, seed: int, dtype: Any, variables: bool, name: str, widths: Sequence[int]):
        import tensorflow as tf

        rng = np.random.default_rng(seed)
        self.n = n_hidden
        self.dtype = dtype
        self.weights = []
        for k, width in enumerate(widths):
            w = (rng.standard_normal((n_in + n_hidden, width)) / np.sqrt(n_in + n_hidden)).astype(_np_dtype(dtype))
            b = (0.1 * rng.standard_normal(width)).astype(_np_dtype(dtype))
            if variables:
                with tf.compat.v1.variable_scope(f"{name}_{k}"):
                    self.weights.append((tf.compat.v1.get_variable("kernel", initializer=w),
                                         tf.compat.v1.get_variable("bias", initializer=b)))
            else:
                self.weights.append((tf.constant(w, name=f"{name}_kernel_{k}"), tf.constant(b, name=f"{name}_bias_{k}")))

    def _affine(self, k: int, x: Any, h: Any) -> Any:
        import tensorflow as tf

        w, b = self.weights[k]
        return tf.nn.bias_add(tf.matmul(tf.concat([x, h], 1), w), b)

    @property
    def output_size(self) -> int:
        return self.n


class _LSTM(_Cell):
    """LSTM cell with state ``(c, h)``; forget bias 1 as in TF's LSTMCell."""

    def __init__(self, n_in: int, n_hidden: int, seed: int, dtype: Any, variables: bool = False, name: str = "lstm"):
        super().__init__(n_in, n_hidden, seed, dtype, variables, name, [4 * n_hidden])

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
    """GRU cell (TF1 GRUCell's equations)."""

    def __init__(self, n_in: int, n_hidden: int, seed: int, dtype: Any, variables: bool = False, name: str = "gru"):
        super().__init__(n_in, n_hidden, seed, dtype, variables, name, [2 * n_hidden, n_hidden])

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


def _weighted_sum(tensors: Sequence[Any], seed: int) -> Any:
    """``sum_k sum(t_k * W_k)`` with fixed random W_k, so every output element gets its own cotangent."""
    import tensorflow as tf

    rng = np.random.default_rng(seed)
    total = None
    for t in tensors:
        w = rng.standard_normal(t.shape.as_list()).astype(_np_dtype(t.dtype))
        term = tf.reduce_sum(t * tf.constant(w))
        total = term if total is None else total + term
    return total


def _session_run(graph_def: Any, outputs: list[str], feed_dict: dict[str, np.ndarray],
                 repeats: int = 5) -> tuple[list[np.ndarray], float]:
    """Import ``graph_def`` into a fresh mode-K graph, run it once (warm-up, the result) and time ``repeats`` more."""
    import tensorflow as tf

    with k_graph() as graph:
        tf.graph_util.import_graph_def(graph_def, name="")
        with tf.compat.v1.Session(graph=graph) as sess:
            result = sess.run(outputs, feed_dict)
            times = []
            for _ in range(repeats):
                start = time.perf_counter()
                sess.run(outputs, feed_dict)
                times.append(time.perf_counter() - start)
    return [np.asarray(r) for r in result], statistics.median(times)


def freeze_and_run(graph: Any, named: list[Any], placeholders: list[Any], feeds: list[np.ndarray], repeats: int = 5
                   ) -> tuple[Any, list[str], list[str], list[np.ndarray], float]:
    """Freeze ``graph`` (variables become constants) for the ``named`` tensors and run it in a fresh
    Session: the frozen GraphDef, the output and input tensor names, Session.run's results and its median
    time over ``repeats`` runs after the first."""
    import tensorflow as tf

    with tf.compat.v1.Session(graph=graph) as sess:
        sess.run(tf.compat.v1.global_variables_initializer())
        frozen = tf.compat.v1.graph_util.convert_variables_to_constants(
            sess, graph.as_graph_def(), [t.op.name for t in named])
    outputs = [t.name for t in named]
    inputs = [p.name for p in placeholders]
    expected, seconds = _session_run(frozen, outputs, dict(zip(inputs, feeds, strict=True)), repeats)
    return frozen, outputs, inputs, expected, seconds


def _finish(name: str, graph: Any, placeholders: list[Any], feeds: list[np.ndarray], forward: list[Any],
            grad_inputs: list[int], claims: Sequence[str], rtol: float) -> GraphCase:
    """Add the loss, the gradients and named Identity outputs; freeze; run in a Session."""
    import tensorflow as tf

    loss = _weighted_sum(forward, seed=1000 + len(name))
    named = [tf.identity(loss, name="loss")]
    named += [tf.identity(t, name=f"out{k}") for k, t in enumerate(forward)]
    grads = tf.gradients(loss, [placeholders[k] for k in grad_inputs]) if grad_inputs else []
    for k, g in zip(grad_inputs, grads, strict=True):
        if g is None:
            raise AssertionError(f"{name}: no gradient for {placeholders[k].name}")
        named.append(tf.identity(tf.convert_to_tensor(g), name=f"grad_{placeholders[k].op.name}"))
    frozen, outputs, inputs, expected, seconds = freeze_and_run(graph, named, placeholders, feeds)
    return GraphCase(
        name=name, graph_def=frozen, inputs=inputs, outputs=outputs, n_forward=1 + len(forward), feeds=feeds,
        expected=expected, session_seconds=seconds, rtol=rtol, grad_inputs=list(grad_inputs),
        op_counts=dict(sorted(collections.Counter(n.op for n in frozen.node).items())), claims=tuple(claims))


def _normal(seed: int, shape: Sequence[int], dtype: Any = np.float32) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal(shape).astype(dtype)


def _dynamic_rnn(name: str, cell_type: type, dtype_name: str = "float32", seqlen: bool = False,
                 unknown_shape: bool = False, variables: bool = False) -> GraphCase:
    import tensorflow as tf

    batch, steps, n_in, n_hidden = 3, 5, 3, 4
    dtype = getattr(tf, dtype_name)
    with k_graph() as graph:
        shape = [None, None, n_in] if unknown_shape else [batch, steps, n_in]
        x = tf.compat.v1.placeholder(dtype, shape, name="x")
        placeholders, feeds = [x], [_normal(1, (batch, steps, n_in), dtype_name)]
        kwargs: dict[str, Any] = {}
        if seqlen:
            lengths = tf.compat.v1.placeholder(tf.int32, [batch], name="seqlen")
            placeholders.append(lengths)
            feeds.append(np.array([5, 2, 4], np.int32))
            kwargs["sequence_length"] = lengths
        cell = cell_type(n_in, n_hidden, seed=2, dtype=dtype, variables=variables)
        y, state = tf.compat.v1.nn.dynamic_rnn(cell, x, dtype=dtype, **kwargs)
        forward = [y, *tf.nest.flatten(state)]
        if unknown_shape:
            # The weights of the loss need static shapes.
            forward = [tf.ensure_shape(t, [batch, steps, n_hidden] if k == 0 else [batch, n_hidden])
                       for k, t in enumerate(forward)]
        claims = ("TensorArrayV3", "TensorArrayScatterV3", "TensorArrayReadV3", "TensorArrayWriteV3",
                  "TensorArrayGatherV3", "TensorArrayGradV3", *_LOOP_OPS, "StackV2", "StackPushV2", "StackPopV2")
        return _finish(name, graph, placeholders, feeds, forward, [0], claims,
                       1e-12 if dtype_name == "float64" else 1e-5)


@functools.cache
def dynamic_rnn_lstm() -> GraphCase:
    """``dynamic_rnn`` over an LSTM (constant weights)."""
    return _dynamic_rnn("dynamic_rnn_lstm", _LSTM)


@functools.cache
def dynamic_rnn_gru() -> GraphCase:
    """``dynamic_rnn`` over a GRU whose weights are frozen variables; x is fed with shape [None, None, 3]."""
    return _dynamic_rnn("dynamic_rnn_gru", _GRU, unknown_shape=True, variables=True)


@functools.cache
def dynamic_rnn_lstm_seqlen() -> GraphCase:
    """``dynamic_rnn`` over an LSTM with a fed int32 ``sequence_length`` (no gradient for it)."""
    return _dynamic_rnn("dynamic_rnn_lstm_seqlen", _LSTM, seqlen=True)


@functools.cache
def dynamic_rnn_lstm_f64() -> GraphCase:
    """``dynamic_rnn_lstm`` in float64."""
    return _dynamic_rnn("dynamic_rnn_lstm_f64", _LSTM, dtype_name="float64")


@functools.cache
def bidirectional_rnn() -> GraphCase:
    """``bidirectional_dynamic_rnn``: LSTM forward, GRU backward, constant ``sequence_length`` (ReverseSequence)."""
    import tensorflow as tf

    batch, steps, n_in = 2, 5, 3
    with k_graph() as graph:
        x = tf.compat.v1.placeholder(tf.float32, [batch, steps, n_in], name="x")
        fw, bw = _LSTM(n_in, 4, seed=3, dtype=tf.float32, name="fw"), _GRU(n_in, 3, seed=4, dtype=tf.float32, name="bw")
        (y_fw, y_bw), (s_fw, s_bw) = tf.compat.v1.nn.bidirectional_dynamic_rnn(
            fw, bw, x, sequence_length=tf.constant([5, 3], tf.int32), dtype=tf.float32)
        forward = [y_fw, y_bw, *tf.nest.flatten(s_fw), s_bw]
        claims = ("ReverseSequence", "TensorArrayV3", "TensorArrayScatterV3", "TensorArrayReadV3",
                  "TensorArrayWriteV3", "TensorArrayGatherV3", "TensorArrayGradV3", *_LOOP_OPS, *_GRAD_OPS)
        return _finish("bidirectional_rnn", graph, [x], [_normal(5, (batch, steps, n_in))], forward, [0], claims, 1e-5)


@functools.cache
def raw_rnn() -> GraphCase:
    """``raw_rnn`` with the ``loop_fn`` of its docstring (a ``tf.cond`` per step) over a GRU; time-major input."""
    import tensorflow as tf

    steps, batch, n_in, n_hidden = 5, 3, 3, 4
    with k_graph() as graph:
        x = tf.compat.v1.placeholder(tf.float32, [steps, batch, n_in], name="x")
        lengths = tf.constant([5, 3, 4], tf.int32)
        cell = _GRU(n_in, n_hidden, seed=6, dtype=tf.float32)
        inputs_ta = tf.TensorArray(tf.float32, size=steps).unstack(x)

        def loop_fn(step: Any, cell_output: Any, cell_state: Any, loop_state: Any) -> tuple[Any, ...]:
            emit_output = cell_output  # None at step 0: raw_rnn then uses cell.output_size
            next_state = cell.zero_state(batch, tf.float32) if cell_output is None else cell_state
            finished = step >= lengths
            next_input = tf.cond(tf.reduce_all(finished), lambda: tf.zeros([batch, n_in], tf.float32),
                                 lambda: inputs_ta.read(step))
            return finished, next_input, next_state, emit_output, None

        outputs_ta, final_state, _ = tf.compat.v1.nn.raw_rnn(cell, loop_fn)
        # raw_rnn stops once every sequence is finished: after max(lengths) == steps steps.
        forward = [tf.ensure_shape(outputs_ta.stack(), [steps, batch, n_hidden]), final_state]
        claims = ("TensorArrayV3", "TensorArrayScatterV3", "TensorArrayReadV3", "TensorArrayWriteV3",
                  "TensorArrayGatherV3", "TensorArrayGradV3", *_LOOP_OPS, *_GRAD_OPS)
        return _finish("raw_rnn", graph, [x], [_normal(7, (steps, batch, n_in))], forward, [0], claims, 1e-5)


@functools.cache
def while_dynamic_ta() -> GraphCase:
    """Hand-written ``while_loop`` over ``dynamic_size`` TensorArrays: split, scatter, read, write, size, concat, gather,
    an int32 array and a close."""
    import tensorflow as tf

    steps, batch, n = 4, 2, 3
    with k_graph() as graph:
        x = tf.compat.v1.placeholder(tf.float32, [steps * batch, n], name="x")
        h0 = tf.compat.v1.placeholder(tf.float32, [batch, n], name="h0")
        w = tf.constant(_normal(8, (n, n)) / n**0.5)
        # Rows of x split into `steps` blocks; the same data scattered in reverse order.
        split_ta = tf.TensorArray(tf.float32, size=0, dynamic_size=True).split(x, tf.fill([steps], batch))
        scatter_ta = tf.TensorArray(tf.float32, size=0, dynamic_size=True).scatter(
            tf.range(steps - 1, -1, -1), tf.reshape(x, [steps, batch, n]))
        out_ta = tf.TensorArray(tf.float32, size=0, dynamic_size=True)  # grows by one per step
        # element_shape unknown in the leading dim: concat then joins blocks of different heights.
        ragged_ta = tf.TensorArray(tf.float32, size=0, dynamic_size=True, infer_shape=False)
        int_ta = tf.TensorArray(tf.int32, size=0, dynamic_size=True)  # no gradient flows through it

        def body(i: Any, h: Any, out_ta: Any, ragged_ta: Any, int_ta: Any) -> tuple[Any, ...]:
            grown = tf.cast(out_ta.size(), tf.float32)  # == i: the array grew by one per step
            h = tf.tanh(tf.matmul(split_ta.read(i) + 0.5 * scatter_ta.read(i), w) + h * (1.0 + 0.1 * grown))
            out_ta = out_ta.write(i, h)
            ragged_ta = ragged_ta.write(i, h[: 1 + i % batch])
            return i + 1, h, out_ta, ragged_ta, int_ta.write(i, i * i)

        _, h, out_ta, ragged_ta, int_ta = tf.compat.v1.while_loop(
            lambda i, *_: i < steps, body, [tf.constant(0), h0, out_ta, ragged_ta, int_ta])
        # Closing needs a consumer to survive freezing (only the outputs' ancestors are kept).
        squares = tf.ensure_shape(int_ta.stack(), [steps])
        with tf.control_dependencies([squares]):
            closed = int_ta.close()
        with tf.control_dependencies([closed]):
            squares = tf.cast(squares, tf.float32)
        size = out_ta.size()
        stacked = tf.ensure_shape(out_ta.stack(), [steps, batch, n])  # dynamic_size: TF does not know steps
        ragged = tf.ensure_shape(ragged_ta.concat(), [sum(1 + i % batch for i in range(steps)), n])
        forward = [h, stacked, ragged, tf.cast(size, tf.float32) * tf.reduce_sum(stacked[-1]), squares]
        claims = ("TensorArrayV3", "TensorArraySplitV3", "TensorArrayCloseV3", "TensorArrayScatterV3", "TensorArrayReadV3",
                  "TensorArrayWriteV3", "TensorArraySizeV3", "TensorArrayConcatV3", "TensorArrayGatherV3",
                  "TensorArrayGradV3", *_LOOP_OPS, *_GRAD_OPS)
        feeds = [_normal(9, (steps * batch, n)), _normal(10, (batch, n))]
        return _finish("while_dynamic_ta", graph, [x, h0], feeds, forward, [0, 1], claims, 1e-5)


@functools.cache
def nested_while() -> GraphCase:
    """An outer ``while_loop`` over steps running an inner one over each step's rows, both through TensorArrays."""
    import tensorflow as tf

    outer, inner, batch, n = 3, 4, 2, 3
    with k_graph() as graph:
        x = tf.compat.v1.placeholder(tf.float32, [outer, inner, batch, n], name="x")
        w = tf.constant(_normal(11, (n, n)) / n**0.5)
        u = tf.constant(_normal(12, (n, n)) / n**0.5)
        outer_in = tf.TensorArray(tf.float32, size=outer).unstack(x)

        def outer_body(t: Any, h: Any, outer_out: Any) -> tuple[Any, ...]:
            inner_in = tf.TensorArray(tf.float32, size=inner).unstack(outer_in.read(t))

            def inner_body(k: Any, g: Any, inner_out: Any) -> tuple[Any, ...]:
                g = tf.tanh(tf.matmul(inner_in.read(k), w) + tf.matmul(g, u))
                return k + 1, g, inner_out.write(k, g)

            _, h, inner_out = tf.compat.v1.while_loop(
                lambda k, *_: k < inner, inner_body, [tf.constant(0), h, tf.TensorArray(tf.float32, size=inner)])
            return t + 1, h, outer_out.write(t, inner_out.stack() * tf.cast(t + 1, tf.float32))

        _, h, outer_out = tf.compat.v1.while_loop(
            lambda t, *_: t < outer, outer_body,
            [tf.constant(0), tf.zeros([batch, n]), tf.TensorArray(tf.float32, size=outer)])
        forward = [outer_out.stack(), h]
        claims = ("TensorArrayV3", "TensorArrayScatterV3", "TensorArrayReadV3", "TensorArrayWriteV3",
                  "TensorArrayGatherV3", "TensorArrayGradV3", *_LOOP_OPS, *_GRAD_OPS)
        return _finish("nested_while", graph, [x], [_normal(13, (outer, inner, batch, n))], forward, [0], claims, 1e-5)


@functools.cache
def jacobian() -> GraphCase:
    """``parallel_for.gradients.jacobian`` (pfor) of a TensorArray loop: pfor turns TensorArrayGradV3 into
    TensorArrayGradWithShape. The jacobian is a forward output; no gradient outputs: TF cannot differentiate
    the jacobian again (the second-order TensorArrayGradV3 fails with "Wrong input container")."""
    import tensorflow as tf
    from tensorflow.python.ops.parallel_for import gradients as pfor_gradients

    steps, n = 4, 3
    with k_graph() as graph:
        x = tf.compat.v1.placeholder(tf.float32, [steps, n], name="x")
        w = tf.constant(_normal(14, (n, n)) / n**0.5)
        x_ta = tf.TensorArray(tf.float32, size=steps).unstack(x)

        def body(i: Any, h: Any, ys: Any) -> tuple[Any, ...]:
            h = tf.tanh(x_ta.read(i) + tf.linalg.matvec(w, h, transpose_a=True))
            return i + 1, h, ys.write(i, h)

        _, _, ys = tf.compat.v1.while_loop(
            lambda i, *_: i < steps, body, [tf.constant(0), tf.zeros([n]), tf.TensorArray(tf.float32, size=steps)])
        y = ys.stack()
        jac = pfor_gradients.jacobian(y, x, use_pfor=True)  # [steps, n, steps, n]
        forward = [y, jac]
        # pfor turns every TensorArrayGradV3 into TensorArrayGradWithShape: none of the former is left.
        claims = ("TensorArrayGradWithShape", "TensorArrayV3", "TensorArrayScatterV3", "TensorArrayReadV3",
                  "TensorArrayWriteV3", "TensorArrayGatherV3", *_LOOP_OPS, "StackV2", "StackPushV2", "StackPopV2")
        return _finish("jacobian", graph, [x], [_normal(15, (steps, n))], forward, [], claims, 1e-5)


CASES: dict[str, Callable[[], GraphCase]] = {
    f.__name__: f for f in (dynamic_rnn_lstm, dynamic_rnn_gru, dynamic_rnn_lstm_seqlen, dynamic_rnn_lstm_f64,
                            bidirectional_rnn, raw_rnn, while_dynamic_ta, nested_while, jacobian)
}


def _table() -> str:
    rows = []
    for name, build in CASES.items():
        case = build()
        ops = " ".join(f"{op}={case.op_counts[op]}" for op in OPS_OF_INTEREST if op in case.op_counts)
        rows.append(f"{name:<26} {case.n_nodes:>6} {1e3 * case.session_seconds:>9.2f}  {ops}")
    return "\n".join([f"{'case':<26} {'nodes':>6} {'run (ms)':>9}  op types of interest", *rows])


if __name__ == "__main__":
    print(_table())
