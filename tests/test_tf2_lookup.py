"""Lookups in captured hash tables (``jta.graph_import._ops_lookup``) against TensorFlow: a tf_keras
``IntegerLookup`` (``mask_token``, ``num_oov_indices``, ``invert=True``) and a Keras 3 one, a ``StaticHashTable`` with a
default (built outside and inside the function), ``MutableHashTable`` and ``DenseHashTable`` read only,
a table in a loop, keys absent and present, int64 keys under x64; an ``IntegerLookup`` then an
``Embedding`` in a train step (the embedding's gradient equal to the tape's); and the refusals: a table
of strings (JAX has none), an insert into a table in the function.

Values are compared bit for bit, eagerly and under ``jax.jit``; without x64 an int64 output is int32.
"""

from __future__ import annotations

import gc
import types
import warnings
from typing import Any

import numpy as np
import pytest

tf = pytest.importorskip("tensorflow")

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402

import jta  # noqa: E402


def _same(got: Any, want: Any, what: str) -> None:
    got, want = np.asarray(got), np.asarray(want)
    assert got.shape == want.shape, (what, got.shape, want.shape)
    assert got.dtype == jax.dtypes.canonicalize_dtype(want.dtype), (what, got.dtype, want.dtype)
    np.testing.assert_array_equal(got, want.astype(got.dtype), err_msg=what)


def _check(f: Any, *args: np.ndarray, checked: bool = False) -> Any:
    """The import of ``f`` against ``f`` eagerly and under ``jit`` (``checked``: ``jta.checked(jit)``, which
    learns the sizes the data decides); the imported function."""
    want = f(*args)
    fn, params = jta.import_function(f, *args)
    jitted = jta.checked(jax.jit(fn)) if checked else jax.jit(fn)
    jax.tree_util.tree_map(lambda g, w: _same(g, w, "eager"), list(fn(params, *args)), list(want))
    jax.tree_util.tree_map(lambda g, w: _same(g, w, "jit"), list(jitted(params, *args)), list(want))
    return fn, params


def _tfk() -> Any:
    return pytest.importorskip("tf_keras")


IDS = np.array([[10, 30, 99, 0], [40, 20, -5, 10]], np.int64)


@pytest.mark.parametrize("options", [dict(mask_token=0), dict(num_oov_indices=2), dict(num_oov_indices=0),
                                     dict(mask_token=0, invert=True)])
def test_integer_lookup(options: dict[str, Any]) -> None:
    lookup = _tfk().layers.IntegerLookup(vocabulary=[10, 20, 30, 40], **options)
    ids = np.array([[1, 3, 0, 2], [4, 1, 2, 3]], np.int64) if options.get("invert") else IDS
    if options.get("num_oov_indices") == 0:
        ids = np.where(np.isin(ids, [10, 20, 30, 40]), ids, 10)  # (TF rejects an unknown id there: a tf.where
    f = tf.function(lambda x: [lookup(x)], input_signature=[tf.TensorSpec(ids.shape, tf.int64)])  # of them)
    _check(f, ids, checked=options.get("num_oov_indices") == 0)


def test_keras3_integer_lookup() -> None:
    keras = pytest.importorskip("keras")
    if keras.backend.backend() != "tensorflow":
        pytest.skip("Keras 3 runs another backend")
    lookup = keras.layers.IntegerLookup(vocabulary=[10, 20, 30, 40], mask_token=0, num_oov_indices=2)
    invert = keras.layers.IntegerLookup(vocabulary=[10, 20, 30, 40], invert=True)
    f = tf.function(lambda x: [lookup(x), invert(tf.constant([[1, 2, 0, 4]], tf.int64))],
                    input_signature=[tf.TensorSpec(IDS.shape, tf.int64)])
    _check(f, IDS)


def test_static_hash_table_with_a_default() -> None:
    table = tf.lookup.StaticHashTable(tf.lookup.KeyValueTensorInitializer(
        tf.constant([7, -3, 12, 0], tf.int32), tf.constant([0.5, 1.5, -2.0, 4.0], tf.float32)), default_value=-1.0)
    f = tf.function(lambda k: [table.lookup(k), table.size()], input_signature=[tf.TensorSpec([None], tf.int32)])
    for keys in (np.array([7, 8, -3, 0, 12, 2**31 - 1, -2**31], np.int32), np.zeros(0, np.int32),
                 np.array([100], np.int32)):
        _check(f, keys)
    # a default for each key (the static table's kernel takes its first), and a default of another shape
    each = tf.function(lambda k, d: [tf.raw_ops.LookupTableFindV2(table_handle=table.resource_handle, keys=k,
                                                                  default_value=d)],
                       input_signature=[tf.TensorSpec(None, tf.int32), tf.TensorSpec(None, tf.float32)])
    _check(each, np.array([[7, 8], [0, 5]], np.int32), np.array([[1.0, 2.0], [3.0, 4.0]], np.float32))
    text = r"Expected shape \[\] or \[3\] for default value, got \[2\]"
    args = np.zeros(3, np.int32), np.ones(2, np.float32)
    with pytest.raises(tf.errors.InvalidArgumentError, match=text):
        each(*args)
    fn, params = jta.import_function(each, *args)
    with pytest.raises(jta.errors.InvalidArgumentError, match=text):
        fn(params, *args)
    # in a branch the data decides
    g = tf.function(lambda k, p: [tf.cond(p > 0, lambda: table.lookup(k), lambda: -table.lookup(k + 1))],
                    input_signature=[tf.TensorSpec([3], tf.int32), tf.TensorSpec([], tf.float32)])
    _check(g, np.array([-3, 12, 6], np.int32), np.float32(1.0))
    _check(g, np.array([-3, 11, 6], np.int32), np.float32(-1.0))


def test_a_table_built_inside_the_function_and_a_table_in_a_loop() -> None:
    @tf.function(input_signature=[tf.TensorSpec([3], tf.int64)])
    def inside(k: Any) -> Any:
        table = tf.lookup.StaticHashTable(tf.lookup.KeyValueTensorInitializer(
            tf.constant([3, 1, 2], tf.int64), tf.constant([30, 10, 20], tf.int64)), -1)
        return [table.lookup(k), table.size()]

    fn, params = jta.import_function(inside, np.array([1, 5, 3], np.int64))  # (before TensorFlow runs it)
    _same(fn(params, np.array([1, 5, 3], np.int64))[0], np.array([10, -1, 30]), "before")
    _check(inside, np.array([1, 5, 3], np.int64))
    table = tf.lookup.StaticHashTable(tf.lookup.KeyValueTensorInitializer(
        tf.constant([1, 2, 3], tf.int32), tf.constant([2, 3, 1], tf.int32)), 0)

    @tf.function(input_signature=[tf.TensorSpec([], tf.int32), tf.TensorSpec([], tf.int32)])
    def chase(k: Any, n: Any) -> Any:  # (the handle is a loop variable of a While)
        return [tf.while_loop(lambda i, k: i < n, lambda i, k: (i + 1, table.lookup(k)), (0, k))[1]]

    _check(chase, np.int32(1), np.int32(5))


def test_mutable_and_dense_hash_tables_read_only() -> None:
    mutable = tf.lookup.experimental.MutableHashTable(tf.int64, tf.float32, default_value=[0.0, -1.0])
    mutable.insert(tf.constant([5, 7], tf.int64), tf.constant([[1.0, 2.0], [3.0, 4.0]]))
    dense = tf.lookup.experimental.DenseHashTable(tf.int64, tf.int32, default_value=-1, empty_key=-1,
                                                  deleted_key=-2, initial_num_buckets=8)
    dense.insert(tf.constant([5, 9, 11], tf.int64), tf.constant([50, 90, 110], tf.int32))
    dense.erase(tf.constant([9], tf.int64))
    f = tf.function(lambda k: [mutable.lookup(k), dense.lookup(k[:, :1]), dense.lookup(k[0]), mutable.size(),
                               dense.size()], input_signature=[tf.TensorSpec([2, 2], tf.int64)])
    _check(f, np.array([[5, 9], [11, 7]], np.int64))
    scalar = tf.lookup.experimental.MutableHashTable(tf.int64, tf.int32, default_value=0)
    scalar.insert(tf.constant([8], tf.int64), tf.constant([80]))
    each = tf.function(lambda k, d, e: [tf.raw_ops.LookupTableFindV2(table_handle=t.resource_handle, keys=k,
                                                                      default_value=v)
                                        for t, v in ((mutable, d), (dense, e), (scalar, e))],
                       input_signature=[tf.TensorSpec([3], tf.int64), tf.TensorSpec([3, 2], tf.float32),
                                        tf.TensorSpec([3], tf.int32)])
    _check(each, np.array([7, 8, 11], np.int64), np.arange(6, dtype=np.float32).reshape(3, 2),
           np.array([4, 5, 6], np.int32))
    _check(tf.function(lambda k: [k + dense.size()], input_signature=[tf.TensorSpec([], tf.int64)]), np.int64(1))
    fn, params = jta.import_function(f, np.zeros((2, 2), np.int64))
    for run in (fn, jta.checked(jax.jit(fn))):  # (a bare jit raises JAX's error)
        with pytest.raises(jta.errors.InvalidArgumentError, match="Using the deleted_key as a table key"):
            run(params, np.array([[5, -2], [0, 0]], np.int64))
    g = tf.function(lambda k: dense.lookup(k), input_signature=[tf.TensorSpec([2, 2], tf.int64)])
    with pytest.raises(tf.errors.InvalidArgumentError, match=r"Expected key shape \[2\] got \[2,2\]"):
        g(np.zeros((2, 2), np.int64))
    fn, params = jta.import_function(g, np.zeros((2, 2), np.int64))
    with pytest.raises(jta.errors.InvalidArgumentError, match=r"Expected key shape \[2\] got \[2,2\]"):
        fn(params, np.zeros((2, 2), np.int64))


def test_int64_keys_under_x64() -> None:
    table = tf.lookup.StaticHashTable(tf.lookup.KeyValueTensorInitializer(
        tf.constant([2**40, 3, -2**35], tf.int64), tf.constant([1.0, 2.0, 3.0], tf.float64)), default_value=0.0)
    f = tf.function(lambda k: [table.lookup(k)], input_signature=[tf.TensorSpec([4], tf.int64)])
    keys = np.array([2**40, 3, -2**35, 2**40 + 1], np.int64)
    with jax.enable_x64(True), warnings.catch_warnings():
        warnings.simplefilter("error")  # (no warning under x64)
        _check(f, keys)
    # without x64 the ids past int32 wrap (2**40 + 3 onto key 3): the import warns, naming x64; the keys past
    # int32 are no keys JAX is given, so the ids inside it are right
    with pytest.warns(UserWarning, match=r'2 of its 3 int64 keys outside int32.*jax_enable_x64", True'):
        fn, params = jta.import_function(f, keys)
    for run in (fn, jax.jit(fn)):
        _same(run(params, np.array([3, 4, 3, 0], np.int64))[0], f(np.array([3, 4, 3, 0], np.int64))[0], "int32")
    values = tf.lookup.StaticHashTable(tf.lookup.KeyValueTensorInitializer(
        tf.constant([1, 2], tf.int64), tf.constant([5, 2**33], tf.int64)), default_value=0)
    g = tf.function(lambda k: [values.lookup(k)], input_signature=[tf.TensorSpec([2], tf.int64)])
    with pytest.warns(UserWarning, match="1 of its 2 int64 values outside int32"):
        jta.import_function(g, np.array([1, 2], np.int64))
    with warnings.catch_warnings():  # (int64 keys and values inside int32: nothing to warn of)
        warnings.simplefilter("error")
        narrow = tf.lookup.StaticHashTable(tf.lookup.KeyValueTensorInitializer(
            tf.constant([1, 2], tf.int64), tf.constant([5, -2**31], tf.int64)), default_value=0)
        _check(tf.function(lambda k: [narrow.lookup(k)], input_signature=[tf.TensorSpec([2], tf.int64)]),
               np.array([1, 3], np.int64))


def _erased_dense_table(value_shape: tuple[int, ...] = ()) -> Any:
    """A ``DenseHashTable`` of one erased key (whose bucket then holds the ``deleted_key``, seen once)."""
    table = tf.lookup.experimental.DenseHashTable(tf.int64, tf.float32, default_value=-np.ones(value_shape),
                                                  empty_key=-100, deleted_key=-200, initial_num_buckets=8)
    values = np.arange(3 * int(np.prod(value_shape)), dtype=np.float32).reshape((3, *value_shape)) + 0.5
    table.insert(tf.constant([3, 7, 42], tf.int64), tf.constant(values))
    table.erase(tf.constant([7], tf.int64))
    return table


def _saved_dense_table(path: Any) -> Any:
    """A SavedModel of a function that reads an erased ``DenseHashTable`` of vector values; its signature."""
    module = tf.Module()
    module.table = _erased_dense_table((2,))
    module.f = tf.function(lambda k: {"v": module.table.lookup(k), "n": module.table.size()},
                           input_signature=[tf.TensorSpec([None], tf.int64)])
    tf.saved_model.save(module, str(path), signatures={"serving_default": module.f})
    return tf.saved_model.load(str(path)).signatures["serving_default"]


def test_a_dense_table_restored_from_a_saved_model(tmp_path: Any) -> None:
    """A restored table has no Python ``DenseHashTable``: its sentinels and value shape come from the
    SavedModel's node that creates it; the erased key's ``deleted_key`` raises TensorFlow's error (the key
    first in the batch decides which), not the erased key's old value."""
    loaded = _saved_dense_table(tmp_path)
    fn, params = jta.import_saved_model(str(tmp_path))
    keys = np.array([3, 7, 42, 5], np.int64)
    want = loaded(k=tf.constant(keys))
    for run in (fn, jax.jit(fn)):
        got = run(params, k=keys)
        _same(got["v"], want["v"], "v")
        _same(got["n"], want["n"], "n")
    for bad, word in (([3, -200], "deleted_key"), ([3, -100, -200], "empty_key"), ([-200, -100], "deleted_key")):
        text = f"Using the {word} as a table key is not allowed"
        with pytest.raises(tf.errors.InvalidArgumentError, match=text):
            loaded(k=tf.constant(bad, tf.int64))
        with pytest.raises(jta.errors.InvalidArgumentError, match=text):
            fn(params, k=np.array(bad, np.int64))
    with pytest.raises(jta.errors.InvalidArgumentError, match="Using the deleted_key as a table key"):
        jta.checked(jax.jit(fn))(params, k=np.array([3, -200], np.int64))  # (a bare jit raises JAX's error)


@pytest.mark.long_only
def test_a_restored_dense_table_once_its_loaded_object_is_gone(tmp_path: Any) -> None:
    """With only the signature kept no restored object holds the table: TensorFlow's context still holds
    the node that creates it; the sentinels' order under ``jta.checked``."""
    loaded = _saved_dense_table(tmp_path)
    gc.collect()
    fn, params = jta.import_function(loaded)
    keys = np.array([3, 7, 42, 5], np.int64)
    want = loaded(k=tf.constant(keys))
    for run in (fn, jax.jit(fn)):
        _same(run(params, k=keys)["v"], want["v"], "v")
    checked = jta.checked(jax.jit(fn))
    for bad, word in (([3, -200], "deleted_key"), ([3, -100, -200], "empty_key"), ([-200, -100], "deleted_key")):
        for run in (fn, checked):
            with pytest.raises(jta.errors.InvalidArgumentError, match=f"Using the {word} as a table key"):
                run(params, k=np.array(bad, np.int64))


def test_a_dense_table_whose_sentinels_are_unknown_is_refused(monkeypatch: Any) -> None:
    """Where jta cannot read a restored table's sentinels its lookups are refused (its export cannot tell the
    erased key's ``deleted_key`` from a key); its size is TensorFlow's."""
    from jta.graph_import import _ops_lookup

    table = _erased_dense_table()
    monkeypatch.setattr(_ops_lookup, "gc", types.SimpleNamespace(get_referrers=lambda *objects: []))  # (no owner)
    monkeypatch.setattr(_ops_lookup, "_creator", lambda ext, tf: (None, None))
    f = tf.function(lambda k: [table.lookup(k)], input_signature=[tf.TensorSpec([2], tf.int64)])
    fn, params = jta.import_function(f, np.array([3, 7], np.int64))
    for run in (fn, jax.jit(fn)):
        with pytest.raises(jta.errors.UnimplementedError, match="DenseHashTable .* whose empty_key and deleted_key"):
            run(params, np.array([3, 7], np.int64))
    export = tf.raw_ops.LookupTableExportV2(table_handle=table.resource_handle, Tkeys=tf.int64, Tvalues=tf.float32)
    read = _ops_lookup._dense(table.resource_handle, "t", *(np.asarray(t) for t in export), tf)
    assert read.sentinels is None and read.size == 2 and -100 not in read.keys, read


def test_dense_table_sentinels_outside_int32_without_x64() -> None:
    table = tf.lookup.experimental.DenseHashTable(tf.int64, tf.int32, default_value=-1, empty_key=-2**62,
                                                  deleted_key=2**62)
    table.insert(tf.constant([5, 9], tf.int64), tf.constant([50, 90], tf.int32))
    f = tf.function(lambda k: [table.lookup(k)], input_signature=[tf.TensorSpec([3], tf.int64)])
    with warnings.catch_warnings():  # (its keys fit int32: no warning)
        warnings.simplefilter("error")
        _check(f, np.array([5, 6, 9], np.int64))  # (no int32 id is a sentinel)


def test_an_integer_lookup_then_an_embedding_in_a_train_step() -> None:
    tfk = _tfk()
    lookup = tfk.layers.IntegerLookup(vocabulary=[10, 20, 30, 40], mask_token=0)
    embed = tfk.layers.Embedding(6, 3, embeddings_initializer=tfk.initializers.RandomNormal(seed=1))
    ids = np.array([[10, 30, 99, 0], [40, 40, -5, 10]], np.int64)
    embed(lookup(ids))

    @tf.function(input_signature=[tf.TensorSpec(ids.shape, tf.int64), tf.TensorSpec([2, 4, 3], tf.float32)])
    def step(x: Any, target: Any) -> Any:
        with tf.GradientTape() as tape:
            loss = tf.reduce_sum(tf.square(embed(lookup(x)) - target))
        return [loss, tf.convert_to_tensor(tape.gradient(loss, embed.embeddings))]

    target = np.linspace(-1, 1, 24, dtype=np.float32).reshape(2, 4, 3)
    want = step(ids, target)
    fn, params = jta.import_function(step, ids, target)
    for got in (fn(params, ids, target), jax.jit(fn)(params, ids, target)):
        np.testing.assert_allclose(got[0], want[0], rtol=1e-6)
        np.testing.assert_allclose(got[1], want[1], rtol=1e-6, atol=1e-7)

    # jax.grad of the forward with respect to the embedding equals the tape's
    forward = tf.function(lambda x, t: tf.reduce_sum(tf.square(embed(lookup(x)) - t)),
                          input_signature=[tf.TensorSpec(ids.shape, tf.int64), tf.TensorSpec([2, 4, 3], tf.float32)])
    fwd, fparams = jta.import_function(forward, ids, target)
    [name] = fparams
    grads = jax.jit(jax.grad(lambda p: fwd(p, ids, target)))(fparams)
    np.testing.assert_allclose(grads[name], want[1], rtol=1e-6, atol=1e-7)


def test_a_default_value_gets_no_gradient() -> None:
    table = tf.lookup.StaticHashTable(tf.lookup.KeyValueTensorInitializer(
        tf.constant([1, 2], tf.int32), tf.constant([0.5, 1.5], tf.float32)), default_value=-1.0)
    f = tf.function(lambda k, d: tf.raw_ops.LookupTableFindV2(table_handle=table.resource_handle, keys=k,
                                                              default_value=d) * d,
                    input_signature=[tf.TensorSpec([3], tf.int32), tf.TensorSpec([], tf.float32)])
    keys, d = np.array([1, 5, 2], np.int32), np.float32(3.0)
    fn, params = jta.import_function(f, keys, d)
    xd = tf.constant(d)
    with tf.GradientTape() as tape:
        tape.watch(xd)
        y = tf.reduce_sum(f(keys, xd))
    np.testing.assert_allclose(jax.jit(jax.grad(lambda d: jnp.sum(fn(params, keys, d))))(d), tape.gradient(y, xd))


def test_string_tables_and_inserts_are_refused() -> None:
    words = tf.lookup.StaticHashTable(tf.lookup.KeyValueTensorInitializer(["a", "b"], [1, 2]), -1)
    f = tf.function(lambda s: words.lookup(s), input_signature=[tf.TensorSpec([2], tf.string)])
    with pytest.raises(jta.errors.UnimplementedError,
                       match="keys string, values int32.*JAX has no strings.*pass their ids as arguments"):
        jta.import_function(f, np.array([b"a", b"c"]))
    names = tf.lookup.StaticHashTable(tf.lookup.KeyValueTensorInitializer([1, 2], ["a", "b"]), "?")
    g = tf.function(lambda k: names.lookup(k), input_signature=[tf.TensorSpec([2], tf.int32)])
    with pytest.raises(jta.errors.UnimplementedError, match="keys int32, values string.*JAX has no strings"):
        jta.import_function(g, np.array([1, 3], np.int32))
    table = tf.lookup.experimental.MutableHashTable(tf.int32, tf.float32, default_value=0.0)

    @tf.function(input_signature=[tf.TensorSpec([2], tf.int32)])
    def insert(k: Any) -> Any:
        table.insert(k, tf.ones([2]))
        return table.lookup(k)

    with pytest.raises(jta.errors.UnimplementedError,
                       match=r"(?s)LookupTableInsertV2.*Lookup tables.*fill the table outside the tf.function"):
        jta.import_function(insert, np.array([1, 2], np.int32))
