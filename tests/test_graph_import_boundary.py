"""jta.import_graph_def at its boundary, against TensorFlow's ``Session.run`` where TF has an answer.

Feeds are converted to the tensor's dtype and their shapes checked as ``Session.run`` does (same
class, same text, eagerly and under ``jit``); input and output tensors are checked at import; a
graph source that is not a graph gets one clear error; loops writing arrays of unknown element shape
run as TensorFlow does, and a dynamic_size array without a capacity is refused publicly.
"""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("tensorflow")

import jax  # noqa: E402

import jta  # noqa: E402
from jta import errors  # noqa: E402
from tests.helpers.tfgraph import k_graph  # noqa: E402

OUTPUTS = ["y:0", "q:0", "r:0", "j:0"]  # x * 2 ([4, 3]), p * 2 ([None, 3]), u * 2 (unknown rank), k + 1


@pytest.fixture(scope="module")
def graph():
    import tensorflow as tf

    with k_graph() as g:
        x = tf.compat.v1.placeholder(tf.float32, [4, 3], name="x")
        p = tf.compat.v1.placeholder(tf.float32, [None, 3], name="p")
        u = tf.compat.v1.placeholder(tf.float32, None, name="u")
        k = tf.compat.v1.placeholder(tf.int32, [], name="k")
        tf.identity(x * 2.0, name="y")
        tf.identity(p * 2.0, name="q")
        tf.identity(u * 2.0, name="r")
        tf.identity(k + 1, name="j")
    return g


@pytest.fixture(scope="module")
def functions(graph):
    """One imported function per (placeholder, output), eager and jitted."""
    pairs = dict(zip(["x:0", "p:0", "u:0", "k:0"], OUTPUTS, strict=True))
    imported = {t: jta.import_graph_def(graph.as_graph_def(), [t], [o]) for t, o in pairs.items()}
    return {t: (f, jax.jit(f)) for t, f in imported.items()}


def _tf_run(graph, tensor, value):
    """(value, None) from ``Session.run``, or (None, the exception it raised)."""
    import tensorflow as tf

    fetch = dict(zip(["x:0", "p:0", "u:0", "k:0"], OUTPUTS, strict=True))[tensor]
    with tf.compat.v1.Session(graph=graph) as sess:
        try:
            return sess.run(fetch, {tensor: value}), None
        except Exception as error:  # noqa: BLE001 - the error is the expected answer
            return None, error


BAD_FEEDS = [("x:0", np.ones(4, np.float32)), ("x:0", np.ones((5, 3), np.float32)),
             ("x:0", np.ones((4, 3, 1), np.float32)), ("p:0", np.ones((2, 4), np.float32)),
             ("p:0", np.ones(3, np.float32)), ("k:0", np.ones(1, np.int32))]


@pytest.mark.parametrize("jit", [False, True], ids=["eager", "jit"])
@pytest.mark.parametrize("tensor,value", BAD_FEEDS, ids=[f"{t}{v.shape}" for t, v in BAD_FEEDS])
def test_a_feed_of_the_wrong_shape_is_refused_as_session_run_refuses_it(graph, functions, tensor, value, jit):
    _, expected = _tf_run(graph, tensor, value)
    assert expected is not None
    with pytest.raises(type(expected)) as info:
        functions[tensor][jit](value)
    assert str(info.value) == str(expected)
    assert "Cannot feed value of shape" in str(info.value) and tensor in str(info.value)


GOOD_FEEDS = [("x:0", np.arange(12, dtype=np.int32).reshape(4, 3)), ("x:0", np.ones((4, 3), np.float64)),
              ("x:0", [[1, 2, 3]] * 4), ("p:0", np.arange(21, dtype=np.int64).reshape(7, 3)),
              ("p:0", np.zeros((0, 3), np.float32)), ("u:0", np.arange(30, dtype=np.int32).reshape(2, 5, 3)),
              ("u:0", np.float32(3.0)), ("k:0", np.float32(2.7)), ("k:0", 5)]


@pytest.mark.parametrize("jit", [False, True], ids=["eager", "jit"])
@pytest.mark.parametrize("tensor,value", GOOD_FEEDS, ids=[f"{t}{np.shape(v)}{np.asarray(v).dtype}"
                                                          for t, v in GOOD_FEEDS])
def test_a_compatible_feed_is_converted_to_the_tensors_dtype(graph, functions, tensor, value, jit):
    expected, error = _tf_run(graph, tensor, value)
    assert error is None
    fed = jax.numpy.asarray(value) if jit else value  # a traced feed is converted with .astype
    (got,) = functions[tensor][jit](fed)
    assert got.dtype == expected.dtype and got.shape == expected.shape
    np.testing.assert_array_equal(np.asarray(got), expected)


def test_a_python_int_that_does_not_fit_is_refused_as_session_run_refuses_it(graph, functions):
    _, expected = _tf_run(graph, "k:0", 2**40)
    assert isinstance(expected, TypeError)
    with pytest.raises(TypeError) as info:
        functions["k:0"][False](2**40)
    assert str(info.value) == str(expected)


@pytest.mark.parametrize("what,tensor", [("outputs", "y:7"), ("inputs", "x:1")])
def test_an_output_index_past_the_nodes_outputs_is_refused_at_import(graph, what, tensor):
    import tensorflow as tf

    with tf.compat.v1.Session(graph=graph) as sess, pytest.raises(Exception) as expected:
        sess.run(tensor, {"x:0": np.ones((4, 3), np.float32)})
    # "Fetch argument ... cannot be interpreted as a Tensor. (<the KeyError's repr>)"
    sentence = str(expected.value).split("(", 1)[1].rsplit(")", 1)[0].strip('"')
    assert sentence.startswith(f"The name '{tensor}' refers to a Tensor which does not exist.")
    inputs, outputs = (["x:0"], [tensor]) if what == "outputs" else ([tensor], ["y:0"])
    with pytest.raises(ValueError) as info:
        jta.import_graph_def(graph.as_graph_def(), inputs, outputs)
    assert str(info.value) == f"jta.import_graph_def ({what}): {sentence}"


@pytest.mark.parametrize("names", ["x:0", [None], 3])
def test_tensor_names_that_are_not_a_list_of_names_are_refused(graph, names):
    with pytest.raises(TypeError, match=r"inputs must be a list of tensor names such as \['x:0'\]"):
        jta.import_graph_def(graph, names, ["y:0"])


def test_a_graph_source_that_is_not_a_graph_says_what_is_accepted():
    with pytest.raises(TypeError, match="takes a GraphDef, a tf.Graph or the path of a binary .pb file, not None"):
        jta.import_graph_def(None, ["x:0"], ["y:0"])


def test_a_missing_file_says_so(tmp_path):
    path = tmp_path / "missing.pb"
    with pytest.raises(FileNotFoundError, match="there is no file .*missing.pb"):
        jta.import_graph_def(path, ["x:0"], ["y:0"])


@pytest.mark.parametrize("kind", ["garbage", "truncated", "empty"])
def test_a_file_that_is_not_a_binary_graph_def_says_so(graph, tmp_path, kind):
    data = graph.as_graph_def().SerializeToString()
    content = {"garbage": b"not a graph \x00\xff\xfe\x01", "truncated": data[:len(data) // 2 + 3], "empty": b""}
    path = tmp_path / f"{kind}.pb"
    path.write_bytes(content[kind])
    with pytest.raises(ValueError, match=r"is not a binary GraphDef .*takes a GraphDef, a tf.Graph or the path"):
        jta.import_graph_def(str(path), ["x:0"], ["y:0"])


def test_a_binary_file_is_read(graph, tmp_path):
    path = tmp_path / "graph.pb"
    path.write_bytes(graph.as_graph_def().SerializeToString())
    (got,) = jta.import_graph_def(path, ["x:0"], ["y:0"])(np.ones((4, 3), np.float32))
    np.testing.assert_array_equal(np.asarray(got), np.full((4, 3), 2.0, np.float32))


def test_an_op_tensorflow_does_not_know_is_refused_by_the_unsupported_list(graph):
    graph_def = graph.as_graph_def()
    node = graph_def.node.add()
    node.name, node.op = "mystery", "NoSuchOpAnywhere"
    node.input.append("x")
    with pytest.raises(errors.UnimplementedError, match="op type NoSuchOpAnywhere"):
        jta.import_graph_def(graph_def, ["x:0"], ["mystery:0"])


def _refusal(build) -> str:
    """The text of the importer's refusal of the graph ``build(tf)`` makes (in TF2's default graph mode)."""
    import tensorflow as tf

    graph = tf.Graph()
    with graph.as_default():
        x = tf.compat.v1.placeholder(tf.float32, [3], name="x")
        tf.identity(build(tf, x), name="y")
    with pytest.raises(errors.UnimplementedError) as caught:
        jta.import_graph_def(graph.as_graph_def(), ["x:0"], ["y:0"])
    return str(caught.value)


def test_a_control_flow_v2_graph_is_refused_with_the_switch_that_builds_v1():
    def build(tf, x):
        looped = tf.while_loop(lambda i, a: i < 3, lambda i, a: (i + 1, a * 2.0), [0, x])[1]
        return tf.gradients(tf.cond(tf.reduce_sum(x) > 0, lambda: looped, lambda: -looped), x)[0]

    text = _refusal(build)
    assert "op type StatelessWhile (2 nodes: gradients/while_grad/while_grad, while)" in text
    assert "Control flow v2 (EmptyTensorList, StatelessIf, StatelessWhile)" in text
    assert "tf.compat.v1.disable_control_flow_v2()" in text


def test_a_graph_with_variables_is_refused_with_how_to_freeze_it():
    def build(tf, x):
        return x * tf.compat.v1.get_variable("w", initializer=np.ones(3, np.float32))

    text = _refusal(build)
    assert "Variables (ReadVariableOp" in text and "convert_variables_to_constants" in text


def test_random_numbers_are_refused_with_how_to_feed_them():
    text = _refusal(lambda tf, x: tf.nn.dropout(x, rate=0.5, seed=1))
    assert "op type RandomUniform (1 node: dropout/random_uniform/RandomUniform)" in text
    assert "Random numbers (RandomUniform): " in text and "through a placeholder" in text


@pytest.fixture(scope="module")
def growing_loop():
    """A while loop with a data-dependent trip count writing a dynamic_size array of unknown element shape."""
    import tensorflow as tf

    with k_graph() as g:
        x = tf.compat.v1.placeholder(tf.float32, [4, 3], name="x")
        n = tf.compat.v1.placeholder(tf.int32, [], name="n")
        array = tf.TensorArray(tf.float32, size=0, dynamic_size=True, name="grow")
        _, array = tf.compat.v1.while_loop(lambda i, a: i < n, lambda i, a: (i + 1, a.write(i, x[0])),
                                           [tf.constant(0), array], name="loop")
        tf.identity(array.stack(), name="out")
    return g


def test_a_loop_growing_an_array_of_unknown_element_shape_matches_session_run(growing_loop):
    """The array is made dense with the shape of its first write, so the loop runs (eagerly: the stack's
    size is the run-time trip count, capacity or not); under jit, without a capacity the dynamic_size
    array is refused publicly."""
    import tensorflow as tf

    feeds = (np.arange(12, dtype=np.float32).reshape(4, 3), np.int32(3))
    with tf.compat.v1.Session(graph=growing_loop) as session:
        expected = session.run("out:0", dict(zip(["x:0", "n:0"], feeds, strict=True)))
    f = jta.import_graph_def(growing_loop.as_graph_def(), ["x:0", "n:0"], ["out:0"], tensor_array_capacity=8)
    np.testing.assert_allclose(np.asarray(f(*feeds)[0]), expected)
    f = jta.import_graph_def(growing_loop.as_graph_def(), ["x:0", "n:0"], ["out:0"])
    np.testing.assert_allclose(np.asarray(f(*feeds)[0]), expected)
    with pytest.raises(errors.UnimplementedError, match="needs a static capacity") as info:
        jax.jit(f)(*feeds)
    assert type(info.value).__module__ == "jta.errors"


def test_a_recurrent_loop_over_an_array_of_unknown_element_shape_matches_session_run():
    """dynamic_rnn over placeholders of unknown batch and time, with a fed sequence_length (a loop bounded
    by maximum_iterations) and an initial state: its output array's element shape is not fully defined
    until the loop body's first write, which fixes it before the loop runs."""
    import tensorflow as tf

    from tests.helpers.graph_corpus import _GRU

    with k_graph() as g:
        x = tf.compat.v1.placeholder(tf.float32, [None, None, 3], name="x")
        lengths = tf.compat.v1.placeholder(tf.int32, [None], name="lengths")
        h0 = tf.compat.v1.placeholder(tf.float32, [None, 4], name="h0")
        outputs, _ = tf.compat.v1.nn.dynamic_rnn(_GRU(3, 4, seed=2, dtype=tf.float32), x, sequence_length=lengths,
                                                 time_major=True, initial_state=h0)
        tf.reduce_sum(outputs, name="loss")
    names = ["x:0", "lengths:0", "h0:0"]
    feeds = (np.random.RandomState(1).randn(5, 2, 3).astype(np.float32), np.array([5, 3], np.int32),
             np.random.RandomState(2).randn(2, 4).astype(np.float32))
    with tf.compat.v1.Session(graph=g) as session:
        expected = session.run("loss:0", dict(zip(names, feeds, strict=True)))
    f = jta.import_graph_def(g.as_graph_def(), names, ["loss:0"])
    for run in (f, jax.jit(f)):
        np.testing.assert_allclose(np.asarray(run(*feeds)[0]), expected, rtol=1e-5, atol=1e-5)


def test_a_traced_tensor_array_limit_names_the_node_and_the_way_out():
    """A gradient array of unknown element shape read at a traced index (an inner loop's array of
    ``infer_shape=False``, read with ``concat()``, in an outer loop traced as a lax loop): eagerly it
    runs as Session.run does; under jit the refusal names the read, the array's node and what to do."""
    import tensorflow as tf

    with k_graph() as g:
        x = tf.compat.v1.placeholder(tf.float32, [3, 2, 2], name="x")

        def inner(e):
            rows = tf.TensorArray(tf.float32, size=2).unstack(e)
            out = tf.TensorArray(tf.float32, size=2, infer_shape=False, name="inner")
            _, _, out = tf.compat.v1.while_loop(
                lambda i, h, ta: i < 2, lambda i, h, ta: (i + 1, tf.tanh(h + rows.read(i)), ta.write(i, h)),
                (tf.constant(0), tf.zeros([2]), out))
            return tf.reshape(out.concat(), [2, 2])

        _, h = tf.compat.v1.while_loop(lambda i, h: i < 3, lambda i, h: (i + 1, h + inner(x[i])),
                                       (tf.constant(0), tf.zeros([2, 2])))
        (gx,) = tf.gradients(tf.reduce_sum(h * h), [x])
        tf.identity(gx, name="gx")
        feed = np.linspace(-1, 1, 12, dtype=np.float32).reshape(3, 2, 2)
        with tf.compat.v1.Session(graph=g) as session:
            expected = session.run("gx:0", {"x:0": feed})
    f = jta.import_graph_def(g.as_graph_def(), ["x:0"], ["gx:0"])
    np.testing.assert_allclose(f(feed)[0], expected, rtol=1e-5, atol=1e-6)
    with pytest.raises(errors.UnimplementedError) as caught:
        jax.jit(f)(feed)
    text = str(caught.value)
    assert text.startswith("Node gradients/while/while/TensorArrayWrite/TensorArrayWriteV3_grad/TensorArrayReadV3 "
                           "(TensorArrayReadV3): under jax.jit its TensorArray (the gradient array of node "
                           "while/inner) meets a limit of traced code: reading at a traced index needs a fully "
                           "known element shape"), text
    assert "call the imported function outside jax.jit" in text
