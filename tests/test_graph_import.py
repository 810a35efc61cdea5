"""jta.import_graph_def: TF1 graphs (control flow v1, TensorArrays, stacks) against TensorFlow's Session.

(a) small hand-built graphs: conds, static and data-dependent loops, nested loops, invariants,
TensorArray gradients, stacks, the one error that lists every unsupported op; (b) the frozen
corpus of ``tests/helpers/graph_corpus.py``: eager, ``jit``, ``jax.grad`` of the forward loss and
one ``vmap``. Each corpus case is built once per process (its builder is cached).
"""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("tensorflow")

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402

import jta  # noqa: E402
from jta import errors  # noqa: E402
from tests.helpers.graph_corpus import CASES  # noqa: E402
from tests.helpers.tfgraph import k_graph  # noqa: E402


def _session(graph, fetches, feeds):
    import tensorflow as tf

    with tf.compat.v1.Session(graph=graph) as sess:
        return sess.run(fetches, feeds)


def _close(got, expected, rtol):
    for g, e in zip(got, expected, strict=True):
        e = np.asarray(e)
        atol = rtol * max(1.0, float(np.max(np.abs(e)))) if e.size else 0.0
        np.testing.assert_allclose(np.asarray(g), e, rtol=rtol, atol=atol)


def _primitives(fn, *args):
    """The names of the primitives in ``fn``'s jaxpr, loop and branch bodies included."""
    names = set()

    def visit(jaxpr):
        for eqn in jaxpr.eqns:
            names.add(eqn.primitive.name)
            for value in eqn.params.values():
                for sub in value if isinstance(value, (tuple, list)) else (value,):
                    if hasattr(sub, "eqns") or hasattr(sub, "jaxpr"):
                        visit(getattr(sub, "jaxpr", sub))

    visit(jax.make_jaxpr(fn)(*args).jaxpr)
    return names


# -- (a) hand-built graphs ----------------------------------------------------------------------
@pytest.fixture(scope="module")
def rnn_graph():
    """A while loop writing a TensorArray, reading a loop invariant; tf.gradients through it."""
    import tensorflow as tf

    rng = np.random.default_rng(0)
    feeds = [rng.standard_normal((5, 2, 3)).astype(np.float32), rng.standard_normal((7, 4)).astype(np.float32)]
    with k_graph() as g:
        x = tf.compat.v1.placeholder(tf.float32, [5, 2, 3], name="x")
        w = tf.compat.v1.placeholder(tf.float32, [7, 4], name="w")

        def step(t, h, ta):
            h = tf.tanh(tf.matmul(tf.concat([x[t], h], 1), w))
            return t + 1, h, ta.write(t, h)

        _, _, ta = tf.compat.v1.while_loop(lambda t, h, ta: t < 5, step,
                                           [tf.constant(0), tf.zeros([2, 4]), tf.TensorArray(tf.float32, size=5)])
        loss = tf.reduce_sum(ta.stack() ** 2, name="loss")
        grads = tf.gradients(loss, [x, w])
        outputs = ["loss:0", *(t.name for t in grads)]
        expected = _session(g, outputs, {"x:0": feeds[0], "w:0": feeds[1]})
    return g.as_graph_def(), outputs, feeds, expected


def test_while_loop_with_tensor_array_gradient(rnn_graph):
    graph_def, outputs, feeds, expected = rnn_graph
    ops = {n.op for n in graph_def.node}
    assert {"TensorArrayGradV3", "StackPushV2", "Enter", "NextIteration"} <= ops
    f = jta.import_graph_def(graph_def, inputs=["x:0", "w:0"], outputs=outputs)
    _close(f(*feeds), expected, 1e-5)
    _close(jax.jit(f)(*feeds), expected, 1e-5)
    jaxpr = _primitives(f, *feeds)
    assert "scan" in jaxpr and "while" not in jaxpr  # static trip counts: forward and gradient loops
    forward = jta.import_graph_def(graph_def, inputs=["x:0", "w:0"], outputs=["loss:0"])
    grads = jax.grad(lambda *a: forward(*a)[0], argnums=(0, 1))(*feeds)
    _close(grads, expected[1:], 1e-5)


def test_under_disable_jit_inside_scan_and_with_x64(rnn_graph):
    graph_def, outputs, feeds, expected = rnn_graph
    f = jta.import_graph_def(graph_def, inputs=["x:0", "w:0"], outputs=outputs)
    with jax.disable_jit():
        _close(f(*feeds), expected, 1e-5)

    def step(carry, scale):  # the imported function as a scan body
        return carry, f(feeds[0] * scale, feeds[1])[0]
    _, losses = jax.lax.scan(step, 0.0, jnp.array([1.0, 1.0], jnp.float32))
    np.testing.assert_allclose(np.asarray(losses), [expected[0]] * 2, rtol=1e-5)
    with jax.enable_x64(True):  # float32 graph under x64: float32 results
        out = jax.jit(f)(*feeds)
        assert [o.dtype for o in out] == [np.float32] * len(out)
        _close(out, expected, 1e-5)


def test_graph_sources(rnn_graph, tmp_path):
    graph_def, outputs, feeds, expected = rnn_graph
    path = tmp_path / "graph.pb"
    path.write_bytes(graph_def.SerializeToString())
    f = jta.import_graph_def(str(path), inputs=["x:0", "w:0"], outputs=outputs[:1])
    _close(f(*feeds), expected[:1], 1e-5)
    import tensorflow as tf  # a tf.Graph is accepted as it is

    graph = tf.Graph()
    with graph.as_default():
        tf.graph_util.import_graph_def(graph_def, name="")
    f_graph = jta.import_graph_def(graph, inputs=["x:0", "w:0"], outputs=outputs[:1])
    _close(f_graph(*feeds), expected[:1], 1e-5)
    with pytest.raises(ValueError, match="no tensor 'nope:0'"):
        jta.import_graph_def(graph_def, inputs=["x:0"], outputs=["nope:0"])
    with pytest.raises(TypeError, match="takes 2 inputs"):
        f(feeds[0])


def test_data_dependent_trip_count_and_stacks():
    """A loop that runs until a value crosses a threshold: lax.while_loop; its gradient stacks need a capacity."""
    import tensorflow as tf

    x0 = np.array([0.3, 0.2], np.float32)
    with k_graph() as g:
        x = tf.compat.v1.placeholder(tf.float32, [2], name="x")
        _, y = tf.compat.v1.while_loop(lambda i, y: tf.reduce_sum(y) < 10.0, lambda i, y: (i + 1, y * 1.5 + 0.1),
                                       [tf.constant(0), x])
        y = tf.identity(y, name="y")
        (gx,) = tf.gradients(tf.reduce_sum(y * y), [x])
        expected = _session(g, ["y:0", gx.name], {"x:0": x0})
    graph_def = g.as_graph_def()
    f = jta.import_graph_def(graph_def, inputs=["x:0"], outputs=["y:0"])
    _close(jax.jit(f)(x0), expected[:1], 1e-5)
    assert "while" in _primitives(f, x0)
    unsized = jta.import_graph_def(graph_def, inputs=["x:0"], outputs=["y:0", gx.name])
    _close(unsized(x0), expected, 1e-5)  # eagerly the loop runs step by step, as in TensorFlow
    with pytest.raises(errors.UnimplementedError, match="pass stack_capacity=N"):
        jax.jit(unsized)(x0)
    f = jta.import_graph_def(graph_def, inputs=["x:0"], outputs=["y:0", gx.name], stack_capacity=64)
    _close(jax.jit(f)(x0), expected, 1e-5)
    _close(jta.checked(unsized)(x0), expected, 1e-5)  # the other way out the refusal names


def test_jta_checked_learns_the_stacks_of_a_fed_trip_count():
    """Without stack_capacity=, jta.checked sizes the gradient stacks of a loop whose trip count is fed from
    what runs need: a first guess of 256 rows, doubled (one recompilation) when a run of 300 steps outgrows
    it; TF's gradient graph and jax.grad of the forward both match Session.run."""
    import tensorflow as tf

    with k_graph() as g:
        x = tf.compat.v1.placeholder(tf.float32, [2], name="x")
        n = tf.compat.v1.placeholder(tf.int32, [], name="n")
        _, y = tf.compat.v1.while_loop(lambda i, y: i < n, lambda i, y: (i + 1, tf.sin(y) * 1.01 + 0.01),
                                       [tf.constant(0), x])
        loss = tf.reduce_sum(y * y, name="loss")
        (gx,) = tf.gradients(loss, [x])
    feeds = [(np.array([0.3, -0.2], np.float32), np.int32(n)) for n in (5, 300, 280)]
    expected = [_session(g, ["loss:0", gx.name], {"x:0": a, "n:0": b}) for a, b in feeds]
    f = jta.import_graph_def(g.as_graph_def(), inputs=["x:0", "n:0"], outputs=["loss:0", gx.name])
    traces = []

    def counted(*args):
        traces.append(1)
        return f(*args)

    checked = jta.checked(counted)
    for feed, want in zip(feeds, expected, strict=True):
        _close(checked(*feed), want, 1e-4)
    assert len(traces) == 2  # 5 steps: the first guess; 300: doubled once; 280: nothing new
    forward = jta.import_graph_def(g.as_graph_def(), inputs=["x:0", "n:0"], outputs=["loss:0"])
    grad = jta.checked(jax.grad(lambda a, b: forward(a, b)[0]))
    for feed, want in zip(feeds, expected, strict=True):
        _close([grad(*feed)], want[1:], 1e-4)


def test_v1_cond_static_and_runtime_predicates():
    import tensorflow as tf

    with k_graph() as g:
        x = tf.compat.v1.placeholder(tf.float32, [3], name="x")
        p = tf.compat.v1.placeholder(tf.bool, [], name="p")
        tf.identity(tf.compat.v1.cond(p, lambda: tf.sin(x) * 2.0, lambda: tf.exp(x)), name="y")
        tf.identity(tf.compat.v1.cond(tf.constant(True), lambda: x + 1.0, lambda: x - 1.0), name="z")
        tf.identity(tf.compat.v1.cond(p, lambda: x, lambda: x[:2]), name="ragged")  # shape known at run time
        xv = np.array([0.1, 0.5, -1.0], np.float32)
        expected = {b: _session(g, ["y:0", "z:0"], {"x:0": xv, "p:0": b}) for b in (True, False)}
    f = jax.jit(jta.import_graph_def(g.as_graph_def(), inputs=["x:0", "p:0"], outputs=["y:0", "z:0"]))
    for b in (True, False):
        _close(f(xv, np.bool_(b)), expected[b], 1e-6)
    ragged = jta.import_graph_def(g.as_graph_def(), inputs=["x:0", "p:0"], outputs=["ragged:0"])
    np.testing.assert_array_equal(ragged(xv, np.bool_(False))[0], xv[:2])  # eagerly the fed predicate prunes
    with pytest.raises(errors.UnimplementedError, match=r"a Merge of shapes \(2,\) and \(3,\)"):
        jax.jit(ragged)(xv, np.bool_(True))


def test_nested_loops_with_invariants():
    import tensorflow as tf

    with k_graph() as g:
        x = tf.compat.v1.placeholder(tf.float32, [3], name="x")
        scale = tf.constant(0.5)

        def outer(i, acc):
            _, inner = tf.compat.v1.while_loop(lambda j, a: j < i + 1, lambda j, a: (j + 1, a * scale + x),
                                               [tf.constant(0), acc])
            return i + 1, inner

        _, y = tf.compat.v1.while_loop(lambda i, a: i < 3, outer, [tf.constant(0), x])
        y = tf.identity(y, name="y")
        (gx,) = tf.gradients(tf.reduce_sum(y), [x])
        xv = np.array([1.0, -2.0, 0.5], np.float32)
        expected = _session(g, ["y:0", gx.name], {"x:0": xv})
    f = jta.import_graph_def(g.as_graph_def(), inputs=["x:0"], outputs=["y:0", gx.name])
    _close(jax.jit(f)(xv), expected, 1e-5)
    forward = jta.import_graph_def(g.as_graph_def(), inputs=["x:0"], outputs=["y:0"])
    _close([jax.grad(lambda v: jnp.sum(forward(v)[0]))(xv)], expected[1:], 1e-5)


def test_fed_trip_count_bounded_by_maximum_iterations_is_a_masked_scan():
    """``t < n`` with a fed ``n`` and ``maximum_iterations=4``: a lax.scan of 4 steps, each a lax.cond on the
    condition, so jax.grad reverses it; TF's own gradient graph pops the stacks the scan filled."""
    import tensorflow as tf

    rng = np.random.default_rng(1)
    xv, wv = rng.standard_normal((4, 3)).astype(np.float32), rng.standard_normal((3, 3)).astype(np.float32)
    with k_graph() as g:
        x = tf.compat.v1.placeholder(tf.float32, [4, 3], name="x")
        w = tf.compat.v1.placeholder(tf.float32, [3, 3], name="w")
        n = tf.compat.v1.placeholder(tf.int32, [], name="n")
        ta = tf.TensorArray(tf.float32, size=4).unstack(x)
        _, h = tf.compat.v1.while_loop(lambda t, h: t < n, lambda t, h: (t + 1, tf.tanh(ta.read(t) + tf.linalg.matvec(w, h))),
                                       (tf.constant(0), tf.ones([3])), maximum_iterations=4)
        loss = tf.reduce_sum(h * h, name="loss")
        grads = tf.gradients(loss, [x, w])
        outputs = ["loss:0", *(t.name for t in grads)]
        expected = {k: _session(g, outputs, {"x:0": xv, "w:0": wv, "n:0": k}) for k in (0, 2, 4, 9)}
    graph_def = g.as_graph_def()
    f = jax.jit(jta.import_graph_def(graph_def, inputs=["x:0", "w:0", "n:0"], outputs=outputs))
    forward = jta.import_graph_def(graph_def, inputs=["x:0", "w:0", "n:0"], outputs=["loss:0"])
    jaxpr = _primitives(forward, xv, wv, np.int32(2))
    assert "scan" in jaxpr and "cond" in jaxpr and "while" not in jaxpr
    grad = jax.jit(jax.grad(lambda a, b, k: forward(a, b, k)[0], argnums=(0, 1)))
    for k, want in expected.items():
        _close(f(xv, wv, np.int32(k)), want, 1e-5)
        _close(grad(xv, wv, np.int32(k)), want[1:], 1e-5)


def test_stack_popped_under_a_run_time_condition():
    """Pops inside a v1 cond on a fed predicate (as pfor's converted gradient loop does): the stack is a
    buffer with a traced top, so a pop that does not happen leaves it as it was."""
    import tensorflow as tf
    from tensorflow.python.ops import gen_data_flow_ops

    xv = np.array([1.0, -2.0], np.float32)
    with k_graph() as g:
        x = tf.compat.v1.placeholder(tf.float32, [2], name="x")
        p = tf.compat.v1.placeholder(tf.bool, [4], name="p")
        stack = gen_data_flow_ops.stack_v2(-1, elem_type=tf.float32, stack_name="s")

        def push(i, acc):  # acc orders the pushes (TF runs independent iterations in parallel)
            pushed = gen_data_flow_ops.stack_push_v2(stack, x * tf.cast(i + 1, tf.float32) + acc)
            return i + 1, acc + 0.0 * tf.reduce_sum(pushed)

        _, pushed = tf.compat.v1.while_loop(lambda i, acc: i < 4, push, [tf.constant(0), tf.constant(0.0)])
        with tf.control_dependencies([pushed]):  # one more push, in line, after the loop's
            with tf.control_dependencies([gen_data_flow_ops.stack_push_v2(stack, x * 10.0)]):
                start = tf.constant(0)

        def pop(i, acc):
            def popped():
                with tf.control_dependencies([acc]):  # in order
                    return tf.reshape(gen_data_flow_ops.stack_pop_v2(stack, tf.float32), [2])

            v = tf.compat.v1.cond(p[i], popped, lambda: tf.zeros([2]))
            return i + 1, acc * 2.0 + v

        _, y = tf.compat.v1.while_loop(lambda i, acc: i < 4, pop, [start, tf.zeros([2])])
        with tf.control_dependencies([y]):
            tf.identity(gen_data_flow_ops.stack_pop_v2(stack, tf.float32), name="last")
        y = tf.identity(y, name="y")
        # In line, a stack of two items: the first pop only where p[1].
        other = gen_data_flow_ops.stack_v2(-1, elem_type=tf.float32, stack_name="t")
        with tf.control_dependencies([gen_data_flow_ops.stack_push_v2(other, x)]):
            with tf.control_dependencies([gen_data_flow_ops.stack_push_v2(other, -x)]):
                first = tf.compat.v1.cond(p[1], lambda: gen_data_flow_ops.stack_pop_v2(other, tf.float32), lambda: x * 0.0)
        with tf.control_dependencies([first]):
            tf.identity(gen_data_flow_ops.stack_pop_v2(other, tf.float32) + first, name="second")
        feeds = [np.array(b, bool) for b in ([True, False, True, True], [False, False, False, False],
                                              [True, True, True, True], [False, True, False, True])]
        expected = [_session(g, ["y:0", "last:0", "second:0"], {"x:0": xv, "p:0": b}) for b in feeds]
    f = jta.import_graph_def(g.as_graph_def(), inputs=["x:0", "p:0"], outputs=["y:0", "last:0", "second:0"])
    _close(f(xv, feeds[0]), expected[0], 1e-6)  # eagerly once (each eager call dispatches op by op)
    jitted = jax.jit(f)
    for b, want in zip(feeds, expected, strict=True):
        _close(jitted(xv, b), want, 1e-6)


def test_one_error_lists_every_unsupported_op():
    import tensorflow as tf

    with k_graph() as g:
        x = tf.compat.v1.placeholder(tf.float32, [4, 4], name="x")
        tf.identity(x * tf.random.uniform([4, 4]) + tf.random.normal([4]) + tf.random.truncated_normal([4]), name="y")
    graph_def = g.as_graph_def()
    mystery = graph_def.node.add()
    mystery.name, mystery.op = "mystery", "NoSuchOp"
    mystery.input.append("y")
    with pytest.raises(errors.UnimplementedError) as info:
        jta.import_graph_def(graph_def, inputs=["x:0"], outputs=["mystery:0"])
    text = str(info.value)
    for op in ("RandomUniform", "RandomStandardNormal", "TruncatedNormal", "NoSuchOp"):
        assert f"op type {op} (1 node: " in text
    ways_out = text.splitlines()[-2:]
    assert ways_out[0].startswith("Random numbers (RandomStandardNormal, RandomUniform, TruncatedNormal): ")
    assert ways_out[1].startswith("Other op types (NoSuchOp): jta.graph_import.supported_ops() lists")
    assert "Placeholder" not in text


# -- (b) the corpus ---------------------------------------------------------------------------
KWARGS: dict[str, dict] = {}  # extra keywords of import_graph_def per case
XFAIL: dict[str, str] = {}  # reason per case expected to fail
GRAD_XFAIL: dict[str, str] = {}


def _case(name):
    if name in XFAIL:
        pytest.xfail(XFAIL[name])
    return CASES[name]()


def _x64(case):
    return jax.enable_x64(True) if any(np.asarray(f).dtype == np.float64 for f in case.feeds) else _null()


class _null:
    def __enter__(self):
        return self

    def __exit__(self, *a):
        return False


@pytest.mark.parametrize("name", [pytest.param(n, marks=pytest.mark.long_only) if k % 3 else n
                                  for k, n in enumerate(CASES)])  # a third of them by default, all under --long
def test_corpus_matches_session(name):
    case = _case(name)
    with _x64(case):
        f = jta.import_graph_def(case.graph_def, inputs=case.inputs, outputs=case.outputs, **KWARGS.get(name, {}))
        _close(f(*case.feeds), case.expected, case.rtol)
        _close(jax.jit(f)(*case.feeds), case.expected, case.rtol)


@pytest.mark.parametrize("name", [n for n in CASES if n not in ("jacobian",)])
def test_corpus_jax_grad_matches_tf_gradients(name):
    case = _case(name)
    if name in GRAD_XFAIL:
        pytest.xfail(GRAD_XFAIL[name])
    with _x64(case):
        forward = jta.import_graph_def(case.graph_def, inputs=case.inputs, outputs=case.outputs[:1])
        grads = jax.jit(jax.grad(lambda *a: forward(*a)[0], argnums=tuple(case.grad_inputs)))(*case.feeds)
        _close(grads, case.expected[case.n_forward:], case.rtol)


def test_corpus_vmap_over_feeds():
    case = CASES["dynamic_rnn_lstm"]()
    f = jax.jit(jta.import_graph_def(case.graph_def, inputs=case.inputs, outputs=case.outputs))
    x = case.feeds[0]
    batch = np.stack([x, 0.5 * x, -x])
    got = jax.vmap(f)(batch)
    for k in range(3):
        _close([g[k] for g in got], f(batch[k]), 1e-5)
    _close([g[0] for g in got], case.expected, case.rtol)
