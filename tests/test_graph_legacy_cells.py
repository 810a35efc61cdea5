"""TF1's RNN cells (``tf.compat.v1.nn.rnn_cell``, from ``tf_keras``) through ``jta.import_graph_def``.

One frozen graph holds one RNN per cell family, each reading its own fed input, so one import, one ``jit``
and one ``jax.grad`` serve every family (``d loss / d x_family`` only depends on that family's RNN):
``LSTMCell`` with peepholes, a projection and a cell clip (``dynamic_rnn``, batch-major, fed
``sequence_length``, an ``initial_state`` computed from the input); ``BasicRNNCell`` (``static_rnn`` with a
constant ``sequence_length``); ``BasicLSTMCell`` (``bidirectional_dynamic_rnn``, time-major, against a
``GRUCell``); a ``MultiRNNCell`` of a ``DropoutWrapper`` (keep probabilities 1) and a ``ResidualWrapper`` of a
``GRUCell``; under ``pytest --long`` also a ``GRUCell`` (time-major, ``initial_state``) and ``raw_rnn`` over an
``LSTMCell``. Against ``Session.run``: every output (the forward outputs and TF's ``tf.gradients`` graph)
under ``jax.jit``, and ``jax.grad`` of the imported loss; under ``--long`` also eagerly (each loop's scan is
compiled on its own then: several times the jitted run).

The cells exist only with ``tf_keras`` installed and ``TF_USE_LEGACY_KERAS=1`` set before TensorFlow is first
imported (``tests/conftest.py`` sets it where ``tf_keras`` is installed); otherwise the module is skipped.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np
import pytest

pytest.importorskip("tensorflow")

import jax  # noqa: E402

import jta  # noqa: E402
from tests.helpers import budget, tf1_programs  # noqa: E402
from tests.helpers.tfgraph import k_graph  # noqa: E402

if not tf1_programs.legacy_cells_available():
    pytest.skip("tf.compat.v1.nn.rnn_cell needs tf_keras and TF_USE_LEGACY_KERAS=1 before TensorFlow is imported",
                allow_module_level=True)

STEPS, BATCH, N_IN = 5, 3, 4
RTOL = 2e-4


@dataclasses.dataclass(frozen=True)
class Corpus:
    """The frozen graph, and for each family the indices of its forward outputs and of its input's gradient."""

    program: tf1_programs.Program
    forward: dict[str, list[int]]  # family -> indices into program.outputs
    grad: dict[str, int]  # family -> index into program.outputs


def _lstm_peephole(b: Any, tf: Any, x: Any) -> list[Any]:
    cell = tf.compat.v1.nn.rnn_cell.LSTMCell(4, use_peepholes=True, num_proj=3, cell_clip=0.7)
    lengths = b.placeholder(tf.int32, [BATCH], np.array([5, 2, 4], np.int32), "lengths")
    mean = tf.reduce_mean(x, 1)  # batch-major input: [BATCH, STEPS, N_IN]
    state0 = tf.compat.v1.nn.rnn_cell.LSTMStateTuple(tf.tanh(mean[:, :1] * tf.ones([1, 4])), tf.tanh(mean[:, 1:]))
    y, state = tf.compat.v1.nn.dynamic_rnn(cell, x, sequence_length=lengths, initial_state=state0, dtype=tf.float32)
    return [y, state.c, state.h]


def _gru(b: Any, tf: Any, x: Any) -> list[Any]:
    del b
    cell = tf.compat.v1.nn.rnn_cell.GRUCell(3)
    y, state = tf.compat.v1.nn.dynamic_rnn(cell, x, initial_state=tf.tanh(x[0, :, :3]), time_major=True)
    return [y, state]


def _basic_rnn(b: Any, tf: Any, x: Any) -> list[Any]:
    del b
    cell = tf.compat.v1.nn.rnn_cell.BasicRNNCell(3)
    outs, state = tf.compat.v1.nn.static_rnn(cell, tf.unstack(x), dtype=tf.float32,
                                             sequence_length=tf.constant([5, 3, 1], tf.int32))
    return [tf.stack(outs), state]


def _basic_lstm_bidirectional(b: Any, tf: Any, x: Any) -> list[Any]:
    del b
    fw, bw = tf.compat.v1.nn.rnn_cell.BasicLSTMCell(3), tf.compat.v1.nn.rnn_cell.GRUCell(2)
    (y_fw, y_bw), (s_fw, s_bw) = tf.compat.v1.nn.bidirectional_dynamic_rnn(
        fw, bw, x, sequence_length=tf.constant([4, 5, 2], tf.int32), dtype=tf.float32, time_major=True)
    return [y_fw, y_bw, *s_fw, s_bw]


def _multi_wrapped(b: Any, tf: Any, x: Any) -> list[Any]:
    del b
    cells = tf.compat.v1.nn.rnn_cell
    cell = cells.MultiRNNCell([
        cells.DropoutWrapper(cells.LSTMCell(N_IN), input_keep_prob=1.0, output_keep_prob=1.0, state_keep_prob=1.0),
        cells.ResidualWrapper(cells.GRUCell(N_IN)),
    ])
    y, state = tf.compat.v1.nn.dynamic_rnn(cell, x, dtype=tf.float32)
    return [y, *tf.nest.flatten(state)]


def _raw_rnn_lstm(b: Any, tf: Any, x: Any) -> list[Any]:
    del b
    cell = tf.compat.v1.nn.rnn_cell.LSTMCell(3, use_peepholes=True)
    lengths = tf.constant([5, 3, 4], tf.int32)
    inputs_ta = tf.TensorArray(tf.float32, size=STEPS).unstack(x)

    def loop_fn(step: Any, output: Any, state: Any, loop_state: Any) -> tuple[Any, ...]:
        state = cell.zero_state(BATCH, tf.float32) if output is None else state
        finished = step >= lengths
        next_input = tf.cond(tf.reduce_all(finished), lambda: tf.zeros([BATCH, N_IN]), lambda: inputs_ta.read(step))
        return finished, next_input, state, output, None

    outputs_ta, state, _ = tf.compat.v1.nn.raw_rnn(cell, loop_fn)
    return [tf.ensure_shape(outputs_ta.stack(), [STEPS, BATCH, 3]), *state]


# family -> (builder, time-major input). Every cell class is in the default four (GRUCell as the backward cell
# and under the ResidualWrapper); --long adds the time-major GRU with an initial state and raw_rnn.
FAMILIES = {
    "LSTMCell_peepholes_proj_clip": (_lstm_peephole, False),
    "BasicRNNCell_static_rnn": (_basic_rnn, True),
    "BasicLSTMCell_bidirectional": (_basic_lstm_bidirectional, True),
    "MultiRNNCell_Dropout_Residual": (_multi_wrapped, False),
    **({"GRUCell_time_major": (_gru, True), "raw_rnn_LSTMCell": (_raw_rnn_lstm, True)} if budget.long_run() else {}),
}


@pytest.fixture(scope="module")
def corpus() -> Corpus:
    import tensorflow as tf

    b = tf1_programs._Builder(seed=7, legacy=True)
    forward: dict[str, list[int]] = {}
    outputs: list[Any] = []
    with k_graph() as graph:
        tf.compat.v1.set_random_seed(7)
        for k, (family, (build, time_major)) in enumerate(FAMILIES.items()):
            shape = [STEPS, BATCH, N_IN] if time_major else [BATCH, STEPS, N_IN]
            x = b.placeholder(tf.float32, shape, np.random.default_rng(k).standard_normal(shape).astype(np.float32),
                              "x")
            with tf.compat.v1.variable_scope(family):
                made = build(b, tf, x)
            forward[family] = [1 + len(outputs) + j for j in range(len(made))]  # outputs[0] is the loss
            outputs += made
        program = tf1_programs._finish(b, graph, outputs)
    assert len(program.grad_inputs) == len(FAMILIES), program.grad_inputs  # each family's x, in order
    grads = {family: program.n_forward + k for k, family in enumerate(FAMILIES)}
    return Corpus(program, forward, grads)


@pytest.fixture(scope="module")
def results(corpus: Corpus) -> dict[str, list[Any]]:
    """Every output under ``jax.jit``, and ``jax.grad`` of the imported loss (jitted) wrt each family's input."""
    p = corpus.program
    f = jta.import_graph_def(p.graph_def, inputs=p.inputs, outputs=p.outputs)
    forward = jta.import_graph_def(p.graph_def, inputs=p.inputs, outputs=p.outputs[:1])
    grads = jax.jit(jax.grad(lambda *a: forward(*a)[0], argnums=tuple(p.grad_inputs)))(*p.feeds)
    return {"jit": jax.jit(f)(*p.feeds), "jax.grad": list(grads)}


def _close(got: Any, expected: np.ndarray, what: str) -> None:
    got, expected = np.asarray(got), np.asarray(expected)
    assert got.shape == expected.shape and got.dtype == expected.dtype, (what, got.shape, expected.shape)
    atol = RTOL * max(1.0, float(np.max(np.abs(expected))))
    np.testing.assert_allclose(got, expected, rtol=RTOL, atol=atol, err_msg=what)


def test_cell_families_match_session(corpus: Corpus, results: dict[str, list[Any]]) -> None:
    """Each family's outputs and TF's gradient of the loss wrt its input under jit, and jax.grad. One test
    for all families: the corpus is one graph, built once by the worker that runs it."""
    _assert_made_of_legacy_cells(corpus)
    p = corpus.program
    for family in FAMILIES:
        for k in [*corpus.forward[family], corpus.grad[family]]:
            _close(results["jit"][k], p.expected[k], f"{family} jit {p.outputs[k]}")
        k = list(FAMILIES).index(family)
        _close(results["jax.grad"][k], p.grads[k], f"{family} jax.grad")
        assert np.any(np.asarray(p.grads[k]) != 0), family


def _assert_made_of_legacy_cells(corpus: Corpus) -> None:
    """The graph really is made of tf_keras' legacy cells' ops (their weights frozen into constants)."""
    names = [n.name for n in corpus.program.graph_def.node]
    for scope in ("lstm_cell/kernel", "gru_cell/gates/kernel", "basic_rnn_cell/kernel", "basic_lstm_cell/kernel",
                  "multi_rnn_cell/cell_0"):
        assert any(scope in n for n in names), scope
    ops = {n.op for n in corpus.program.graph_def.node}
    assert not ops & {"VariableV2", "VarHandleOp", "ReadVariableOp"}, ops


@pytest.mark.long_only
def test_cell_families_eagerly(corpus: Corpus) -> None:
    """Every family's outputs and TF's gradients, run without jit (each loop's scan compiled on its own, so
    this takes several times the jitted run: under ``--long`` only)."""
    p = corpus.program
    f = jta.import_graph_def(p.graph_def, inputs=p.inputs, outputs=p.outputs)
    for name, got, expected in zip(p.outputs, f(*p.feeds), p.expected, strict=True):
        _close(got, expected, f"eager {name}")
