"""The shape of an imported TF1 train step's compiled code (no timings): ``benchmarks.graph_rnn``'s
LSTM and GRU graphs (``dynamic_rnn`` plus ``tf.compat.v1.gradients``, weights fed) compile to one
while loop forward and one backward (the loops whose step holds a dot), no step copies or selects a whole ``[T, ...]`` buffer (which
would make the step cost grow with T), no step passes a ``[T, ...]`` buffer through a conditional (a
``sequence_length`` loop, bounded by ``maximum_iterations``, was a masked ``lax.scan`` whose step was a
``lax.cond`` carrying every buffer: about twice the step's cost on CPU), and the results match ``Session.run``.
"""

from __future__ import annotations

import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jta

pytest.importorskip("tensorflow")

from benchmarks import graph_rnn  # noqa: E402

BATCH, STEPS, INPUTS, HIDDEN = 3, 7, 5, 4


def _whole_buffer_ops(text: str, body: str) -> list[str]:
    """Copies and selects of a ``[STEPS, ...]`` array, and conditionals passing one, in a while body and
    what it calls."""
    comps = graph_rnn.hlo_computations(text)
    found, todo, seen = [], [body], set()
    while todo:
        name = todo.pop()
        if name in seen or name not in comps:
            continue
        seen.add(name)
        for line in comps[name]:
            op = graph_rnn._opcode(line)
            if op in ("copy", "select") and re.search(rf"=\s*\w+\[{STEPS},", line) or \
                    op == "conditional" and re.search(rf"=\s*\(.*\w+\[{STEPS},.*\)\s+conditional\(", line):
                found.append(line[:200])
            if op in graph_rnn._CALLERS:
                todo += graph_rnn._callees(line)
    return found


@pytest.mark.parametrize("name", ["lstm", "gru", "gru_seqlen"])
def test_train_step_compiles_to_two_loops_without_whole_buffer_work(name):
    cell, _, rest = name.partition("_")
    case = graph_rnn.build(cell, BATCH, STEPS, INPUTS, HIDDEN, seqlen=rest == "seqlen")
    fns, sess = graph_rnn.session_fns(case)
    try:
        expected = fns["tf_session"](*case.feeds)
    finally:
        sess.close()
    jitted = jax.jit(jta.import_graph_def(case.graph_def, case.inputs, case.outputs))
    args = tuple(jnp.asarray(f) for f in case.feeds)
    for got, want in zip(jitted(*args), expected, strict=True):
        np.testing.assert_allclose(np.asarray(got), want, rtol=2e-5, atol=2e-6 * float(np.max(np.abs(want))))
    text = str(jitted.lower(*args).compile().as_text())
    summary = graph_rnn.hlo_summary(text)
    # The RNN's loops are those whose step multiplies matrices (XLA may add small loops of its own,
    # e.g. for an expanded scatter outside the RNN).
    steps = [loop for loop in summary["loops"] if "dot" in loop["top_level"] or "dot" in loop["in_fusions"]]
    assert len(steps) == 2, summary
    for loop in steps:
        assert not _whole_buffer_ops(text, loop["body"]), (loop["body"], _whole_buffer_ops(text, loop["body"]))


def test_sequence_length_forward_graph_keeps_reverse_mode():
    """The train step's forward loop is a lax.while_loop (it pushes onto TF's gradient stacks); the
    forward-only graph has no stacks and stays a masked lax.scan, so jax.grad of it matches TF's
    gradient (under jit; eagerly the fed lengths are concrete and the count static)."""
    case = graph_rnn.build("gru", BATCH, STEPS, INPUTS, HIDDEN, seqlen=True)
    fns, sess = graph_rnn.session_fns(case)
    try:
        expected = fns["tf_session"](*case.feeds)[-1]  # the gradient with respect to x
    finally:
        sess.close()
    forward = jta.import_graph_def(case.graph_def, case.inputs, case.outputs[:1])
    k = case.inputs.index("x:0")

    def loss(x):
        return forward(*case.feeds[:k], x, *case.feeds[k + 1:])[0]

    got = jax.jit(jax.grad(loss))(jnp.asarray(case.feeds[k]))
    np.testing.assert_allclose(np.asarray(got), expected, rtol=2e-5, atol=1e-6)
