"""TensorFlow's stateful random ops (``tf.random.uniform`` / ``normal`` / ``truncated_normal`` /
``categorical`` / ``shuffle``, integer ``uniform``; a tf_keras ``Dropout`` or ``GaussianNoise`` in training): each node
is a kernel that owns a Philox generator (``GuardedPhiloxRandom``), seeded once from the node's
``seed``/``seed2`` attributes and stepped on every run; a function called from two call ops has two.

The generator is state, so jta keeps it where it keeps a variable's: in ``params``, under
``"random:<call ops>/<function>/<node>"``, six uint32 words (the key's two, then the counter's four). An op draws
from the state it reads (:mod:`._ops_random`'s distributions, TensorFlow's bit for bit) and writes the
state stepped as the kernel steps it (``ReserveRandomOutputs``: 256 blocks per output value); loops
carry it and conds output it as they do an assigned variable, and ``with_updates=True`` returns it.

* Seeds (``GuardedPhiloxRandom::Init``): ``seed`` is the key, ``seed2`` the counter's high words. Where
  both are 0 (no ``tf.random.set_seed``, no op seed) TensorFlow seeds the kernel from the OS: so does
  the import, once.
* A ``tf.random.Generator`` keeps its state in a variable, which ``RngReadAndSkip`` reads and steps
  (:func:`read_and_skip`, an assignment to the import); its draws are the stateless V2 ops.
* A kernel's state lives in TensorFlow's process, not its variables: the import starts every kernel
  as a fresh one, as the first call of a new ``tf.function`` has it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from . import _ops_random
from ._messages import GraphError
from ._nodes import Node
from ._ops import static_value

PREFIX = "random:"  # (the params key of a kernel's state: "random:<call ops>/<function>/<node>")
_PER_VALUE = 256  # blocks a kernel reserves per output value (ReserveRandomOutputs(n, 256))

State = Any  # uint32 [6]: key words 0-1, counter words 0-3 (numpy or JAX)
Kernel = Callable[[Node, list[Any], State], tuple[list[Any], State]]
KERNEL_OPS: dict[str, Kernel] = {}


def relative_key(function: str, node: Node) -> str:
    """``node``'s generator in ``function`` (``"<top>"``: the imported one), under the calls that run it."""
    return node.name if function == "<top>" else f"{function}/{node.name}"


def key_of(sites: list[str], relative: str) -> str:
    """The ``params`` key of a generator: TensorFlow instantiates a function's kernels once per call op
    (a ``PartitionedCall``, a ``While``, an ``If``), so the path of call ops that ran it is part of it."""
    return PREFIX + "/".join([*sites, relative])


def initial_state(node: Node) -> np.ndarray:
    """A fresh kernel's generator: ``PhiloxRandom(seed, seed2)``, or one the OS seeds where both are 0."""
    seed, seed2 = (int(node.attr(k, 0)) & 0xFFFFFFFFFFFFFFFF for k in ("seed", "seed2"))
    if seed == seed2 == 0:
        seed, seed2 = (int(w) for w in np.random.SeedSequence().generate_state(2, np.uint64))
    return np.asarray([w & 0xFFFFFFFF for w in (seed, seed >> 32, 0, 0, seed2, seed2 >> 32)], np.uint32)


def state_words(state: State) -> tuple[_ops_random.Words, _ops_random.Words]:
    state = state if isinstance(state, np.ndarray) else jnp.asarray(state, jnp.uint32)
    return (state[0], state[1]), (state[2], state[3], state[4], state[5])


def stepped(state: State, blocks: int) -> State:
    """``state`` after ``blocks`` blocks (``PhiloxRandom::Skip``, carries and all)."""
    key, counter = state_words(state)
    xp = np if isinstance(state, np.ndarray) else jnp
    return xp.stack([*key, *_ops_random.skip(counter, np.asarray(blocks, np.int64))]).astype(np.uint32)


def register_kernel(*ops: str) -> Callable[[Kernel], Kernel]:
    def register(fn: Kernel) -> Kernel:
        KERNEL_OPS.update(dict.fromkeys(ops, fn))
        return fn
    return register


_FLOAT_KINDS = {"RandomUniform": "uniform", "RandomStandardNormal": "normal", "TruncatedNormal": "truncated"}


@register_kernel(*_FLOAT_KINDS)
def _floats(node: Node, args: list[Any], state: State) -> tuple[list[Any], State]:
    """Uniform floats in [0, 1), standard normals, normals truncated at 2 (input: the shape)."""
    shape = _ops_random.shape_of(node, args[0])
    key, counter = state_words(state)
    values = _ops_random.quietly(lambda: _ops_random.float_values(
        _FLOAT_KINDS[node.op], key, counter, shape, node.attr("dtype")))
    return [values], stepped(state, int(np.prod(shape, dtype=np.int64)) * _PER_VALUE)


@register_kernel("RandomUniformInt")
def _integers(node: Node, args: list[Any], state: State) -> tuple[list[Any], State]:
    """Integers in ``[minval, maxval)`` (inputs: the shape, minval, maxval)."""
    shape = _ops_random.shape_of(node, args[0])
    key, counter = state_words(state)
    values = _ops_random.quietly(lambda: _ops_random.int_values(
        node, key, counter, shape, node.attr("Tout"), (args[1], args[2])))
    return [values], stepped(state, int(np.prod(shape, dtype=np.int64)) * _PER_VALUE)


@register_kernel("Multinomial")
def _categorical(node: Node, args: list[Any], state: State) -> tuple[list[Any], State]:
    """``tf.random.categorical``: ``StatelessMultinomial``'s draw from the kernel's generator, which
    reserves ``2 * ceil4(num_samples)`` values a row on CPU (two words make one double)."""
    logits, count = args
    n = int(static_value(node, count, "num_samples"))
    key, counter = state_words(state)
    samples = _ops_random.quietly(lambda: _ops_random.categorical(node, key, counter, logits, n))
    return [samples], stepped(state, np.shape(logits)[0] * (-(-n // 4) * 4) * 2 * _PER_VALUE)


def read_and_skip(node: Node, state: Any, alg: Any, delta: Any) -> Any:
    """``RngReadAndSkip``: a ``tf.random.Generator``'s state (int64 ``[counter low, counter high, key]``
    for Philox) stepped past ``delta`` values (256 blocks each), as its draws need it; the caller
    outputs the state read (which ``StatelessRandom*V2`` ops then draw from)."""
    if int(static_value(node, alg, "the algorithm")) not in (_ops_random.PHILOX, _ops_random.AUTO_SELECT):
        GraphError.TF2_UNSUPPORTED.raise_(items=f"  - node {node.name} ({node.op}): a tf.random.Generator of "
                                                "another algorithm than Philox (auto_select's on CPU and GPU)")
    if state.dtype != jnp.int64:
        GraphError.TF2_UNSUPPORTED.raise_(items=(
            f"  - node {node.name} ({node.op}): a tf.random.Generator's state is int64, which JAX keeps only with "
            "jax_enable_x64: run jax.config.update('jax_enable_x64', True) before importing"))
    wide = jax.lax.bitcast_convert_type(state[:2], jnp.uint64)
    low = wide[0] + jnp.asarray(delta).astype(jnp.uint64) * jnp.uint64(_PER_VALUE)
    high = wide[1] + (low < wide[0]).astype(jnp.uint64)
    return jnp.concatenate([jax.lax.bitcast_convert_type(jnp.stack([low, high]), jnp.int64), state[2:]])


@register_kernel("RandomShuffle")
def _shuffle(node: Node, args: list[Any], state: State) -> tuple[list[Any], State]:
    """``tf.random.shuffle``: the rows in :func:`._ops_random.shuffle_order` (Fisher-Yates, ``n - 1`` words
    drawn one by one from ``ReserveSamples32(n - 1)``: ``ceil((n - 1) / 4)`` blocks). A tensor of at most
    one row or one element is copied and draws nothing (the kernel reserves no samples then)."""
    value = jnp.asarray(args[0])
    if not _ops_random.shuffles(value):
        return [value], state
    n = value.shape[0]
    key, counter = state_words(state)
    order = _ops_random.shuffle_order(key, counter, n)
    return [jnp.take(value, order, axis=0)], stepped(state, -(-(n - 1) // 4))
