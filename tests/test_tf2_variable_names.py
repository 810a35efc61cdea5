"""``params`` keys of captured Keras 3 variables (:mod:`jta.graph_import._variable_names`).

The Keras 3 variables are found from the Python objects the ``tf.function`` reaches (a global model and
optimizer in a train step, a closure, a bound method's ``self``, the model itself) with the keys a
lookup in the whole heap gives, and without that lookup; a program without Keras costs none while
Keras 3 is loaded; a ``ConcreteFunction`` (no Python function to walk) still gets the paths.
"""

from __future__ import annotations

import gc
from typing import Any

import numpy as np
import pytest

tf = pytest.importorskip("tensorflow")
keras = pytest.importorskip("keras")

import jta  # noqa: E402
from jta.graph_import import _variable_names  # noqa: E402

X = np.ones((2, 3), np.float32)
MODEL = keras.Sequential([keras.layers.Dense(4, name="hidden"), keras.layers.Dropout(0.5), keras.layers.Dense(2)],
                         name="net")
MODEL.build((None, 3))
OPTIMIZER = keras.optimizers.SGD(0.1, momentum=0.9)


@tf.function
def _train_step(x: Any) -> Any:
    with tf.GradientTape() as tape:
        loss = tf.reduce_sum(MODEL(x, training=True) ** 2)
    grads = tape.gradient(loss, MODEL.trainable_variables)
    OPTIMIZER.apply(grads, MODEL.trainable_variables)
    return loss


class _Trainer:
    def __init__(self, model: Any) -> None:
        self.model = model

    @tf.function
    def forward(self, x: Any) -> Any:
        return self.model(x)


def _closure(model: Any) -> Any:
    return tf.function(lambda x: model(x))


def _keys(f: Any, monkeypatch: Any) -> tuple[list[str], int]:
    """The import's keys and how many times it looked in the whole heap."""
    scans = [0]

    def counting(*args: Any) -> Any:
        scans[0] += 1
        return gc.get_objects(*args)

    with monkeypatch.context() as m:
        m.setattr(_variable_names.gc, "get_objects", counting)
        _, params = jta.import_function(f, X, with_updates=True)
    return sorted(params), scans[0]


def _heap_keys(f: Any) -> list[str]:
    concrete = f.get_concrete_function(tf.TensorSpec(X.shape, tf.float32))
    return sorted(jta.import_function(concrete, X, with_updates=True)[1])  # (a ConcreteFunction: the heap)


@pytest.mark.filterwarnings("ignore:.*steps random generators")
def test_keras_paths_come_from_what_the_function_reaches(monkeypatch):
    trainer = _Trainer(MODEL)
    for name, f in {"train step": _train_step, "closure": _closure(MODEL), "method": trainer.forward,
                    "model": tf.function(MODEL)}.items():
        keys, scans = _keys(f, monkeypatch)
        assert scans == 0, name
        assert keys == _heap_keys(f), name
        assert "net/hidden/kernel" in keys, (name, keys)
    keys, _ = _keys(_train_step, monkeypatch)
    assert {"sgd/iteration", "sgd/net_hidden_kernel_momentum"} <= set(keys), keys


def test_a_program_without_keras_does_not_look_in_the_heap(monkeypatch):
    v = tf.Variable(np.ones(3, np.float32), name="v")
    keys, scans = _keys(tf.function(lambda x: x * v), monkeypatch)
    assert (keys, scans) == (["v"], 0)


def test_the_walk_passes_over_objects_whose_attributes_raise(monkeypatch):
    class Touchy:
        def __getattr__(self, name: str) -> Any:
            raise RuntimeError(name)

    touchy = Touchy()
    f = tf.function(lambda x: MODEL(x) if touchy is not None else x)
    keys, scans = _keys(f, monkeypatch)
    assert scans == 0 and "net/hidden/kernel" in keys, keys
