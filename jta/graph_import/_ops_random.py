"""TensorFlow's stateless random ops, bit for bit: ``tf.random.stateless_uniform`` / ``_normal`` /
``_truncated_normal`` / ``_categorical``, ``tf.random.split`` / ``fold_in``, ``stateless_dropout``,
``tf.random.experimental.stateless_shuffle``.

They are pure functions of (shape, seed) on Philox4x32-10 (``philox_random.h``): a 128-bit counter
(four uint32 words, word 0 the lowest) and a 64-bit key (two words). One call runs ten rounds of
``(c0, c1, c2, c3) -> (hi(B*c2) ^ c1 ^ k0, lo(B*c2), hi(A*c0) ^ c3 ^ k1, lo(A*c0))`` (the key raised by
the Weyl constants between rounds), gives four uint32 and steps the counter by one ("a block").

* The seed (``GenerateKey``, ``stateless_random_ops.cc``): its two values, sign-extended to 64 bits, are
  a counter; one Philox block of it under the key ``0x02461E293EC8F720`` gives ``mix``; the key is
  ``mix[0:2]``, the counter ``(0, 0, mix[2], mix[3])``. ``StatelessRandomGetKeyCounter`` returns them
  as uint64 (key ``[1]``, counter ``[2]``) for the V2 ops.
* Outputs (``FillPhiloxRandom``, ``random_op_cpu.h``): a distribution of a fixed number of words per
  output makes group ``g`` of its ``kResultElementCount`` outputs from block ``counter + g`` (4 outputs of
  32-bit types, 2 of 64-bit ones); the truncated normal, which rejects, restarts group ``g`` at block
  ``counter + g * 256 * group / 4`` and draws words one by one until the group is full.
* Values (``random_distributions.h``, ``random_distributions_utils.h``): uniform floats put random
  mantissa bits under the exponent of 1 and subtract 1; normals are Box-Muller of two words (floats) or
  four (doubles), ``u1`` clamped at 1e-7; uniform ints are ``lo + bits % (hi - lo)`` in unsigned
  arithmetic.
* Shuffles (``RandomShuffle<T>``, ``random_shuffle_op.cc``, shared by the stateful ``tf.random.shuffle``
  and ``StatelessShuffle``): Fisher-Yates over the rows from the first up, row ``i`` swapped with row
  ``i + word_i % (n - i)``, the words taken one by one from the counter on (``SingleSampleAdapter``).

Everything is uint32 arithmetic (the 32x32->64 multiply from 16-bit halves), so it runs without
``jax_enable_x64``, under ``jit`` and with traced seeds; constant seeds compute in numpy (static).
Without x64 a traced uint64 cannot exist: the key and counter of a traced seed then travel as uint32
pairs (shape ``[n, 2]``, low word first), and 64-bit outputs (float64, int64) are JAX's 32-bit ones:
float64 uniforms rounded to float32, float64 normals computed in float32 (within about 1e-6: the float32
rounding of ``2 pi u`` shows near sin's and cos's zeros), int64 as its low 32 bits (what jta does with
int64 values elsewhere; bounded ones exact where they fit). Under ``jax.enable_x64`` all match exactly,
normals within an ulp of log/sin/cos.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from . import _ops_checks
from ._messages import GraphError
from ._nodes import Node
from ._ops import OPS, is_static, registrar, static_value

_reg = registrar(OPS)

_M = (0xD2511F53, 0xCD9E8D57)  # Philox's round multipliers (kPhiloxM4x32A, kPhiloxM4x32B)
_W = (0x9E3779B9, 0xBB67AE85)  # its key increments (kPhiloxW32A, kPhiloxW32B)
_SCRAMBLE_KEY = (0x3EC8F720, 0x02461E29)  # GenerateKey's key
PHILOX, _THREEFRY, AUTO_SELECT = 1, 2, 3  # rng_alg.h
_TRUNCATE_SKIP = 256  # kReservedSamplesPerOutput of FillPhiloxRandomTask<..., true>
U32 = np.uint32

Words = tuple[Any, ...]  # uint32 arrays (numpy or JAX), one per word


# -- the generator ------------------------------------------------------------------------------
def has_64_bits(xp: Any) -> bool:
    """Whether ``xp`` has 64-bit integers and floats: numpy always, JAX only with x64."""
    return xp is np or jax.dtypes.canonicalize_dtype(np.int64) == np.int64  # (jax.enable_x64 included)


def _bits(xp: Any, v: Any, dtype: Any) -> Any:
    """``v``'s bits as ``dtype`` (of the same width)."""
    return v.view(dtype) if xp is np else jax.lax.bitcast_convert_type(v, dtype)


def _mulhilo(a: int, b: Any) -> tuple[Any, Any]:
    """The high and low words of the 64-bit product ``a * b`` (``MultiplyHighLow``), from 16-bit halves
    so that it needs no uint64 (JAX has none without x64)."""
    al, ah = U32(a & 0xFFFF), U32(a >> 16)
    bl, bh = b & U32(0xFFFF), b >> U32(16)
    ll, lh, hl, hh = bl * al, bh * al, bl * ah, bh * ah
    mid = (ll >> U32(16)) + (lh & U32(0xFFFF)) + (hl & U32(0xFFFF))
    return hh + (lh >> U32(16)) + (hl >> U32(16)) + (mid >> U32(16)), b * U32(a)


def _round(_: Any, state: tuple[Any, ...]) -> tuple[Any, ...]:
    """One Philox round of ``(c0, c1, c2, c3, k0, k1)``, the key raised for the next (the raise after the
    last round is never used)."""
    c0, c1, c2, c3, k0, k1 = state
    hi0, lo0 = _mulhilo(_M[0], c0)
    hi1, lo1 = _mulhilo(_M[1], c2)
    return hi1 ^ c1 ^ k0, lo1, hi0 ^ c3 ^ k1, lo0, k0 + U32(_W[0]), k1 + U32(_W[1])


@jax.jit
def _philox_jax(key: Words, counter: Words) -> Words:
    """:func:`philox` in JAX: a loop, not ten copies of the round (XLA compiles it several times
    faster), jitted so that an eager call compiles it once per shape."""
    shape = np.broadcast_shapes(*(np.shape(c) for c in counter))
    state = tuple(jnp.broadcast_to(jnp.asarray(c, jnp.uint32), shape) for c in counter)
    return jax.lax.fori_loop(0, 10, _round, (*state, *(jnp.asarray(k, jnp.uint32) for k in key)))[:4]


def philox(key: Words, counter: Words) -> Words:
    """One Philox4x32-10 block per counter (``PhiloxRandom::operator()``): the counters' words may be
    arrays, the key's are scalars."""
    if not all(is_static(w) for w in (*key, *counter)):
        return _philox_jax(tuple(key), tuple(counter))
    state = (*counter, *key)
    for r in range(10):
        state = _round(r, state)
    return state[:4]


def skip(counter: Words, blocks: np.ndarray) -> Words:
    """``counter`` stepped by ``blocks`` (int64, static) as ``PhiloxRandom::Skip`` does, carries and all."""
    lo, hi = (blocks & 0xFFFFFFFF).astype(U32), (blocks >> 32).astype(U32)
    c0, c1, c2, c3 = counter
    c0 = c0 + lo
    hi = hi + (c0 < lo).astype(U32)
    c1 = c1 + hi
    carry = (c1 < hi).astype(U32)
    c2 = c2 + carry
    return c0, c1, c2, c3 + (carry & (c2 == 0).astype(U32))


def _blocks(key: Words, counter: Words, blocks: np.ndarray) -> Any:
    """The four words of the blocks at ``counter + blocks``, stacked on a last axis."""
    xp = np if all(is_static(w) for w in (*key, *counter)) else jnp
    return xp.stack(philox(key, skip(counter, blocks)), axis=-1)


def words(key: Words, counter: Words, count: int) -> Any:
    """The first ``count`` words of the stream at ``counter``, in order (``SingleSampleAdapter``)."""
    return _blocks(key, counter, np.arange(-(-count // 4), dtype=np.int64)).reshape(-1)[:count]


# -- seeds, keys and counters -------------------------------------------------------------------
def _low_high(xp: Any, v: Any) -> tuple[Any, Any]:
    """The low and high words of the integers ``v`` as 64-bit two's complement (int32 sign-extended,
    as ``GenerateKey`` casts to uint64)."""
    if np.dtype(v.dtype).itemsize == 8:
        return (v & 0xFFFFFFFF).astype(U32), (v >> 32).astype(U32)
    low = v.astype(U32) if xp is np else jax.lax.bitcast_convert_type(v.astype(jnp.int32), jnp.uint32)
    return low, xp.where(v < 0, U32(0xFFFFFFFF), U32(0)).astype(U32)


def seed_key_counter(node: Node, seed: Any) -> tuple[Words, Words]:
    """The Philox key and counter of a ``[2]`` seed (``GenerateKey``, ``stateless_random_ops.cc``)."""
    xp = np if is_static(seed) else jnp
    if np.shape(seed) != (2,):
        GraphError.TF2_UNSUPPORTED.raise_(items=f"  - node {node.name} ({node.op}): seed must have shape [2], "
                                                f"not {list(np.shape(seed))}")
    low, high = _low_high(xp, xp.asarray(seed))
    mix = philox(tuple(U32(k) for k in _SCRAMBLE_KEY), (low[0], high[0], low[1], high[1]))
    return (mix[0], mix[1]), (U32(0) * mix[2], U32(0) * mix[2], mix[2], mix[3])


def _as_uint64(xp: Any, words: Words) -> Any:
    """Word pairs (low first) as TensorFlow's uint64 values: uint64 where ``xp`` has it, else ``[n, 2]``
    uint32 pairs (read back by :func:`_words_of`)."""
    pairs = xp.stack([xp.stack(words[i:i + 2]) for i in range(0, len(words), 2)]).astype(U32)
    if not has_64_bits(xp):
        return pairs
    wide = pairs.astype(xp.uint64)
    return wide[:, 0] | (wide[:, 1] << xp.uint64(32))


def _words_of(node: Node, v: Any, what: str) -> Words:
    """The uint32 words (low first) of a uint64 key or counter: uint64 values, or the pairs of
    :func:`_as_uint64`. A traced uint64 that JAX cut to 32 bits (``alg='philox'``'s Python-side
    scrambling of a traced seed without x64) has lost its high words: refused."""
    xp = np if is_static(v) else jnp
    dtype = np.dtype(v.dtype)
    if dtype == np.uint64:
        low, high = (v & xp.uint64(0xFFFFFFFF)).astype(U32), (v >> xp.uint64(32)).astype(U32)
        return tuple(w for i in range(v.shape[0]) for w in (low[i], high[i]))
    if dtype == np.uint32 and np.ndim(v) == 2 and np.shape(v)[1] == 2:
        return tuple(v[i, j] for i in range(v.shape[0]) for j in range(2))
    GraphError.NOT_STATIC.raise_(
        node=node.name, op=node.op,
        what=f"its uint64 {what} (computed here from traced values, and JAX keeps uint64 only with "
             "jax_enable_x64; a seed through tf.random's default alg='auto_select' runs traced)")
    raise AssertionError  # (raise_ raises)


def key_counter_v2(node: Node, args: list[Any]) -> tuple[Words, Words]:
    """The key and counter inputs (1 and 2) of a V2 op, after checking its algorithm (input 3):
    Philox, or auto_select (Philox on CPU, ``GetKeyCounterAlgFromInputs``); ThreeFry is refused, as
    TensorFlow's CPU kernel refuses it ("Unsupported algorithm id")."""
    alg = int(static_value(node, args[3], "the algorithm (alg)"))
    if alg == _THREEFRY:
        GraphError.TF2_UNSUPPORTED.raise_(
            items=f"  - node {node.name} ({node.op}): the ThreeFry algorithm (alg=2), which TensorFlow runs "
                  "only under XLA (its CPU kernel refuses it too); use alg='philox' or 'auto_select' (the "
                  "default), whose streams jta reproduces")
    if alg not in (PHILOX, AUTO_SELECT):
        GraphError.TF2_UNSUPPORTED.raise_(items=f"  - node {node.name} ({node.op}): unknown algorithm id {alg}")
    key, counter = _words_of(node, args[1], "key"), _words_of(node, args[2], "counter")
    return key[:2], counter[:4]


# -- distributions: words to values -------------------------------------------------------------
def _xp(words: Any) -> Any:
    return np if is_static(words) else jnp


def _float32(words: Any) -> Any:
    """``Uint32ToFloat``: 23 random mantissa bits under the exponent of 1, minus 1: [0, 1)."""
    xp = _xp(words)
    return _bits(xp, (words & U32(0x7FFFFF)) | U32(127 << 23), np.float32) - np.float32(1)


def _half(words: Any, dtype: Any) -> Any:
    """``Uint16ToHalf`` / ``Uint16ToBfloat16``: the low word's 10 (7) mantissa bits, minus 1, in ``dtype``."""
    xp = _xp(words)
    mantissa, one = (10, 15 << 10) if np.dtype(dtype) == np.float16 else (7, 127 << 7)
    bits = ((words & U32((1 << mantissa) - 1)) | U32(one)).astype(np.uint16)
    return _bits(xp, bits, dtype) - xp.asarray(1, dtype)


def uint64_to_double(w0: Any, w1: Any) -> Any:
    """``Uint64ToDouble``: 20 mantissa bits of ``w0`` over the 32 of ``w1``, minus 1. Without x64 (traced)
    the same value rounded to float32."""
    xp = _xp(w0)
    if has_64_bits(xp):
        bits = ((w0 & U32(0xFFFFF)).astype(xp.uint64) << xp.uint64(32)) | w1.astype(xp.uint64)
        return _bits(xp, bits | xp.uint64(1023 << 52), np.float64) - 1.0
    return (w0 & U32(0xFFFFF)).astype(jnp.float32) * 2.0 ** -20 + w1.astype(jnp.float32) * 2.0 ** -52


def _split(a: Any) -> tuple[Any, Any]:
    """Veltkamp's split of float32 ``a`` into two halves of 12 significant bits (exact products)."""
    t = a * np.float32(4097)
    high = t - (t - a)
    return high, a - high


def _two_pi_times(xp: Any, u: Any) -> Any:
    """``float(2.0f * M_PI * u)`` as ``BoxMullerFloat`` computes it: ``M_PI`` is a double, so the product
    is rounded once to float32. In float64 where there is one; else Dekker's exact product of
    ``float32(2 pi)`` and ``u`` plus the rest of 2 pi (rounded once in all of 2M tries)."""
    if has_64_bits(xp):
        return (2 * np.pi * u.astype(np.float64)).astype(np.float32)
    high = np.float32(2 * np.pi)
    low = np.float32(2 * np.pi - np.float64(high))
    product = high * u
    (a1, a2), (b1, b2) = _split(high), _split(u)
    error = ((a1 * b1 - product) + a1 * b2 + a2 * b1) + a2 * b2
    return product + (error + low * u)


def _box_muller(u1: Any, u2: Any, dtype: Any) -> tuple[Any, Any]:
    """``BoxMullerFloat`` / ``BoxMullerDouble`` of two uniforms in [0, 1): ``u1`` clamped at 1e-7."""
    xp = _xp(u1)
    u1 = xp.maximum(u1, xp.asarray(1e-7, dtype))
    v1 = _two_pi_times(xp, u2) if np.dtype(dtype) == np.float32 else xp.asarray(2 * np.pi, dtype) * u2
    radius = xp.sqrt(xp.asarray(-2.0, dtype) * xp.log(u1))
    return xp.sin(v1) * radius, xp.cos(v1) * radius


def box_muller_double(words: Any) -> tuple[Any, Any]:
    """``BoxMullerDouble`` of the words ``[..., 4]``. Without x64 in float32, with ``log(u1)`` from the
    double's bits: ``log1p(-(1 - u1))`` for ``u1 >= 1/2``, where ``1 - u1`` is exact from the bits and
    ``u1`` rounded to float32 would lose the small logarithm (x64 or not, within float32 rounding)."""
    w0, w1, w2, w3 = (words[..., k] for k in range(4))
    u1, u2 = uint64_to_double(w0, w1), uint64_to_double(w2, w3)
    if has_64_bits(_xp(words)):
        return _box_muller(u1, u2, np.float64)
    # 1 - u1 = (2**52 - mantissa) * 2**-52: borrow from the high word when the low one is not 0.
    low = (U32(0) - w1).astype(jnp.float32) * 2.0 ** -52
    high = (U32(0xFFFFF) - (w0 & U32(0xFFFFF)) + (w1 == 0).astype(U32)).astype(jnp.float32) * 2.0 ** -20
    log_u1 = jnp.where(u1 < 0.5, jnp.log(jnp.maximum(u1, np.float32(1e-7))), jnp.log1p(-(high + low)))
    v1 = _two_pi_times(jnp, u2)
    radius = jnp.sqrt(np.float32(-2.0) * log_u1)
    return jnp.sin(v1) * radius, jnp.cos(v1) * radius


def _uniform(words: Any, dtype: Any) -> Any:
    """Uniform [0, 1) values, groups on the first axis (``UniformDistribution``): one per word, a
    float64 from each pair of words."""
    if np.dtype(dtype) == np.float64:
        return uint64_to_double(words[:, 0::2], words[:, 1::2])
    if np.dtype(dtype) == np.float32:
        return _float32(words)
    return _half(words, dtype)


def _normal(words: Any, dtype: Any) -> Any:
    """Normal values (``NormalDistribution``): floats by Box-Muller of word pairs (half and bfloat16
    computed in float32 and rounded), doubles of word quadruples."""
    xp = _xp(words)
    if np.dtype(dtype) == np.float64:
        return xp.stack(box_muller_double(words), axis=-1)
    a, b = _box_muller(_float32(words[:, 0::2]), _float32(words[:, 1::2]), np.float32)
    return xp.stack([a, b], axis=-1).reshape(words.shape[0], -1)


# -- filling outputs ------------------------------------------------------------------------------
def _fill(key: Words, counter: Words, size: int, per_block: int, make: Callable[[Any], Any]) -> Any:
    """``size`` values, ``per_block`` from each block at ``counter + g`` (``FillPhiloxRandomTask`` of a
    fixed number of samples per output): ``make`` maps the blocks' words ``[groups, 4]`` to values
    ``[groups, per_block]``; the last group's extra values are dropped."""
    groups = -(-size // per_block)
    return make(_blocks(key, counter, np.arange(groups, dtype=np.int64))).reshape(-1)[:size]


def _width(dtype: Any) -> int:
    """Values per block: 4 of 32-bit (and narrower) types, 2 of 64-bit ones."""
    return 2 if np.dtype(dtype).itemsize == 8 else 4


def _truncated(key: Words, counter: Words, size: int, dtype: Any, tries: int = 0) -> Any:
    """Truncated normal values (``TruncatedNormalDistribution`` through ``SingleSampleAdapter``): group
    ``g`` restarts at block ``counter + g * skip`` and keeps the first normals with ``|x| < 2`` in order.
    It draws ``tries`` blocks a group (by default 16 candidates for 4 floats, 16 for 2 doubles); in the
    (p < 1e-14) case that some group needs more, it draws again with 8 times as many (``lax.cond`` when
    traced; a numpy loop when not), so the result is exact."""
    per = _width(dtype)
    groups = -(-size // per)
    skip = per * _TRUNCATE_SKIP // 4

    def draw(tries: int) -> tuple[Any, Any]:
        offsets = np.arange(groups, dtype=np.int64)[:, None] * skip + np.arange(tries, dtype=np.int64)
        words = _blocks(key, counter, offsets)  # [groups, tries, 4]
        xp = _xp(words)
        if per == 2:
            a, b = box_muller_double(words)
        else:
            a, b = _box_muller(_float32(words[..., 0::2]), _float32(words[..., 1::2]), np.float32)
        values = xp.stack([a, b], axis=-1).reshape(groups, -1)  # candidates in the order drawn
        kept = xp.abs(values) < 2.0
        rank = xp.cumsum(kept, axis=1)
        first = xp.stack([xp.argmax(kept & (rank == j + 1), axis=1) for j in range(per)], axis=1)
        return xp.take_along_axis(values, first, axis=1), xp.all(rank[:, -1] >= per)

    tries = tries or (4 if per == 4 else 8)
    values, full = draw(tries)
    if _known(full) is None:
        return jax.lax.cond(full, lambda: values, lambda: draw(tries * 8)[0]).reshape(-1)[:size]
    while not _known(full):  # (numpy, or a concrete call: no cond to compile)
        tries *= 8
        values, full = draw(tries)
    return values.reshape(-1)[:size]


def _known(flag: Any) -> bool | None:
    """A boolean's value, or None while it is traced."""
    try:
        return bool(flag)
    except jax.errors.ConcretizationTypeError:  # (TracerBoolConversionError is one)
        return None


def _output(values: Any, shape: tuple[int, ...], dtype: Any) -> Any:
    """``values`` in ``shape`` and ``dtype`` (JAX's dtype for it when traced: float32 for float64
    without x64)."""
    if is_static(values):
        return np.asarray(values).astype(dtype).reshape(shape)
    return jnp.asarray(values).astype(jax.dtypes.canonicalize_dtype(dtype)).reshape(shape)


def _run(fn: Callable[..., Any], statics: tuple[Any, ...], *arrays: Any) -> Any:
    """``fn(*statics, *arrays)``: in numpy when every array is static, else as one jitted call (cached
    by ``fn`` and ``statics``), so that an eager call compiles one program per op, not one per
    primitive and shape (which made eager calls take seconds)."""
    if all(is_static(a) for a in jax.tree_util.tree_leaves(arrays)):
        return fn(*statics, *arrays)
    return _compiled(fn, statics)(*arrays)


@functools.lru_cache(maxsize=256)
def _compiled(fn: Callable[..., Any], statics: tuple[Any, ...]) -> Callable[..., Any]:
    return jax.jit(functools.partial(fn, *statics))


def _float_draw(kind: str, shape: tuple[int, ...], dtype: Any, key: Words, counter: Words) -> Any:
    """``kind`` ("uniform", "normal", "truncated") values of a float ``dtype`` in ``shape`` (not empty)."""
    size = int(np.prod(shape, dtype=np.int64))
    if kind == "truncated":
        return _output(_truncated(key, counter, size, dtype), shape, dtype)
    make = _uniform if kind == "uniform" else _normal
    return _output(_fill(key, counter, size, _width(dtype), lambda w: make(w, dtype)), shape, dtype)


def float_values(kind: str, key: Words, counter: Words, shape: tuple[int, ...], dtype: Any) -> Any:
    """:func:`_float_draw` through :func:`_run`; an empty shape draws nothing."""
    if not np.prod(shape, dtype=np.int64):
        return np.zeros(shape, dtype)
    return _run(_float_draw, (kind, shape, np.dtype(dtype)), key, counter)


# -- integers ---------------------------------------------------------------------------------------
def _mod64(high: Any, low: Any, r: Any) -> Any:
    """``(high * 2**32 + low) % r`` for a uint32 ``r > 0`` in uint32 arithmetic: long division of the low
    word's bits into ``high % r`` (for 64-bit bits when JAX has no uint64)."""
    rem = high % r
    for bit in range(31, -1, -1):
        over = rem >> U32(31)  # the doubled remainder passes 2**32: it is then >= r
        rem = (rem << U32(1)) | ((low >> U32(bit)) & U32(1))
        rem = jnp.where((over == 1) | (rem >= r), rem - r, rem)
    return rem


def _uniform_int(words: Any, lo: Any, hi: Any, dtype: Any) -> Any:
    """``UniformDistribution<int>``: ``lo + bits % (hi - lo)`` with the range unsigned (``SignedAdd``);
    int64 from word pairs."""
    xp = _xp(words)
    if np.dtype(dtype).itemsize == 4:
        lo32, hi32 = _low_high(xp, xp.asarray(lo))[0], _low_high(xp, xp.asarray(hi))[0]
        return _bits(xp, (lo32 + words % (hi32 - lo32)).astype(U32), np.int32)
    w0, w1 = words[:, 0::2], words[:, 1::2]
    if has_64_bits(xp):
        lo64 = _bits(xp, xp.asarray(lo).astype(np.int64), np.uint64)
        hi64 = _bits(xp, xp.asarray(hi).astype(np.int64), np.uint64)
        bits = w0.astype(xp.uint64) | (w1.astype(xp.uint64) << xp.uint64(32))
        return _bits(xp, lo64 + bits % (hi64 - lo64), np.int64)
    # JAX without x64 holds minval and maxval as int32, so the range fits a uint32 (the int64 result
    # is then kept as its low 32 bits, as jta keeps int64 values elsewhere).
    lo32, hi32 = _low_high(xp, xp.asarray(lo))[0], _low_high(xp, xp.asarray(hi))[0]
    return _bits(xp, lo32 + _mod64(w1, w0, hi32 - lo32), np.int32)


def _full_int(words: Any, dtype: Any) -> Any:
    """``UniformFullIntDistribution``: the words themselves, 64-bit values from pairs (low word first;
    without x64 only the low word)."""
    xp = _xp(words)
    if np.dtype(dtype).itemsize == 4:
        return _bits(xp, words, dtype)
    if not has_64_bits(xp):
        return _bits(xp, words[:, 0::2], jax.dtypes.canonicalize_dtype(dtype))
    bits = words[:, 0::2].astype(xp.uint64) | (words[:, 1::2].astype(xp.uint64) << xp.uint64(32))
    return _bits(xp, bits, dtype)


def _int_draw(shape: tuple[int, ...], dtype: Any, key: Words, counter: Words, lo: Any, hi: Any) -> Any:
    """Uniform integers of ``dtype`` in ``shape`` (not empty): in ``[lo, hi)``, or full-range where
    ``lo`` is None."""
    size = int(np.prod(shape, dtype=np.int64))
    if lo is None:
        return _output(_fill(key, counter, size, _width(dtype), lambda w: _full_int(w, dtype)), shape, dtype)
    return _output(_fill(key, counter, size, _width(dtype), lambda w: _uniform_int(w, lo, hi, dtype)), shape,
                   dtype)


def int_values(node: Node, key: Words, counter: Words, shape: tuple[int, ...], dtype: Any,
                bounds: tuple[Any, Any] | None) -> Any:
    """:func:`_int_draw` through :func:`_run`, after TensorFlow's checks of the bounds (only where it
    draws: an empty shape draws nothing)."""
    if not np.prod(shape, dtype=np.int64):
        return np.zeros(shape, dtype)
    if bounds is not None:
        _check_bounds(node, *bounds)
    return _run(_int_draw, (shape, np.dtype(dtype)), key, counter, *(bounds or (None, None)))


def _check_bounds(node: Node, lo: Any, hi: Any) -> None:
    """TensorFlow's checks of ``minval``/``maxval``: scalars, ``lo < hi``."""
    if np.ndim(lo) or np.ndim(hi):
        GraphError.TF2_UNSUPPORTED.raise_(items=f"  - node {node.name} ({node.op}): minval and maxval must be "
                                                f"0-D, got shapes {list(np.shape(lo))} and {list(np.shape(hi))}")
    _ops_checks.uniform_bounds(node, lo, hi)


def shape_of(node: Node, v: Any) -> tuple[int, ...]:
    return _ops_checks.dimensions(node, static_value(node, v, "the output's shape"))


def quietly(fn: Callable[[], Any]) -> Any:
    """``fn()`` without numpy's overflow warnings: the uint32 arithmetic wraps on purpose."""
    with np.errstate(over="ignore", divide="ignore"):
        return fn()


# -- the ops --------------------------------------------------------------------------------------
@_reg("StatelessRandomGetKeyCounter", "StatelessRandomGetKeyCounterAlg")
def _get_key_counter(node: Node, args: list[Any]) -> list[Any]:
    """The scrambled key ``[1]`` and counter ``[2]`` of a seed (uint64; uint32 pairs when traced without
    x64), and Philox's id, what ``auto_select`` is on CPU (``GetKeyCounterAlgOp``)."""
    def run() -> list[Any]:
        key, counter = seed_key_counter(node, args[0])
        xp = np if is_static(key[0]) else jnp
        return [_as_uint64(xp, key), _as_uint64(xp, counter)]
    out = quietly(run)
    return out + [np.asarray(PHILOX, np.int32)] if node.op.endswith("Alg") else out


@_reg("StatelessRandomGetAlg")
def _get_alg(node: Node, args: list[Any]) -> list[Any]:
    return [np.asarray(PHILOX, np.int32)]


def _v2(kind: str) -> Callable[[Node, list[Any]], list[Any]]:
    def op(node: Node, args: list[Any]) -> list[Any]:
        def run() -> Any:
            key, counter = key_counter_v2(node, args)
            return float_values(kind, key, counter, shape_of(node, args[0]), node.attr("dtype"))
        return [quietly(run)]
    op.__doc__ = f"The V2 op of {kind} floats: shape, key, counter, alg (``stateless_random_ops_v2.cc``)."
    return op


def _v1(kind: str) -> Callable[[Node, list[Any]], list[Any]]:
    def op(node: Node, args: list[Any]) -> list[Any]:
        def run() -> Any:
            key, counter = seed_key_counter(node, args[1])
            return float_values(kind, key, counter, shape_of(node, args[0]), node.attr("dtype"))
        return [quietly(run)]
    op.__doc__ = f"The v1 op of {kind} floats: shape, seed (``stateless_random_ops.cc``)."
    return op


for _kind, _v2_name, _v1_name in (("uniform", "StatelessRandomUniformV2", "StatelessRandomUniform"),
                                  ("normal", "StatelessRandomNormalV2", "StatelessRandomNormal"),
                                  ("truncated", "StatelessTruncatedNormalV2", "StatelessTruncatedNormal")):
    OPS[_v2_name] = _v2(_kind)
    OPS[_v1_name] = _v1(_kind)


def _full_range_fits(node: Node, seeds: list[Any]) -> None:
    """Full-range 64-bit integers drawn from a traced seed need x64: JAX would keep their low 32 bits, and
    ``tf.random.experimental.stateless_split``'s new seeds (such draws) would key other streams."""
    if node.op.startswith("StatelessRandomUniformFullInt") and np.dtype(node.attr("dtype")).itemsize == 8 and \
            not has_64_bits(jnp) and not all(is_static(s) for s in seeds):
        GraphError.TF2_UNSUPPORTED.raise_(items=(
            f"  - node {node.name} ({node.op}): full-range 64-bit integers (tf.random.experimental."
            "stateless_split's seeds) from a run-time seed, which JAX holds in 64 bits only with jax_enable_x64: "
            "run jax.config.update('jax_enable_x64', True) before importing"))


@_reg("StatelessRandomUniformIntV2", "StatelessRandomUniformFullIntV2")
def _int_v2(node: Node, args: list[Any]) -> list[Any]:
    """Uniform integers from a key and counter: in ``[minval, maxval)`` (inputs 4, 5) or full-range."""
    _full_range_fits(node, args[1:3])

    def run() -> Any:
        key, counter = key_counter_v2(node, args)
        bounds = (args[4], args[5]) if node.op == "StatelessRandomUniformIntV2" else None
        return int_values(node, key, counter, shape_of(node, args[0]), node.attr("dtype"), bounds)
    return [quietly(run)]


@_reg("StatelessRandomUniformInt", "StatelessRandomUniformFullInt")
def _int_v1(node: Node, args: list[Any]) -> list[Any]:
    """Uniform integers from a seed: in ``[minval, maxval)`` (inputs 2, 3) or full-range."""
    _full_range_fits(node, args[1:2])

    def run() -> Any:
        key, counter = seed_key_counter(node, args[1])
        bounds = (args[2], args[3]) if node.op == "StatelessRandomUniformInt" else None
        return int_values(node, key, counter, shape_of(node, args[0]), node.attr("dtype"), bounds)
    return [quietly(run)]


@_reg("StatelessMultinomial")
def _multinomial(node: Node, args: list[Any]) -> list[Any]:
    """``tf.random.stateless_categorical`` (``MultinomialFunctor<CPUDevice>``, ``multinomial_op.cc``): row
    ``b``'s ``j``-th sample is the number of classes whose unnormalized CDF (double sums of
    ``exp(logit - max)`` over the finite logits) is at most ``u * total``, ``u`` a double of the words
    ``2 (b n + j)`` and ``+1`` of the seed's stream. That is TensorFlow's draw where its CPU kernel does the
    rows in one block (small batches: all the tests'). A larger batch it splits over its threads
    (``Shard``, Eigen's cost model: the split depends on the machine's core count), and each block of
    rows from ``s`` restarts the stream at block ``s * (n + 3) // 4``: TensorFlow's own results then
    differ between machines, and jta's (one block) match only its first block of rows."""
    logits, count, seed = args
    n = int(static_value(node, count, "num_samples"))
    return [quietly(lambda: categorical(node, *seed_key_counter(node, seed), logits, n))]


def categorical(node: Node, key: Words, counter: Words, logits: Any, n: int) -> Any:
    """``n`` samples a row of ``logits`` from the stream at ``key``, ``counter``."""
    if n < 0:
        _ops_checks.invalid(node, f"num_samples should be non-negative, got {n}")
    batch = np.shape(logits)[0]
    if batch * n == 0:
        return np.zeros((batch, n), node.attr("output_dtype"))
    return _run(_categorical, (n, np.dtype(node.attr("output_dtype"))), key, counter, logits)


def _categorical(n: int, dtype: Any, key: Words, counter: Words, logits: Any) -> Any:
    """``n`` classes a row of ``logits`` (see :func:`_multinomial`): double CDFs, float32 without x64."""
    batch = np.shape(logits)[0]
    words = _blocks(key, counter, np.arange(-(-batch * n // 2), dtype=np.int64)).reshape(-1, 2)[:batch * n]
    xp = _xp(words) if is_static(logits) else jnp
    u = uint64_to_double(words[:, 0], words[:, 1]).reshape(batch, n)
    x = xp.asarray(logits).astype(np.float64 if has_64_bits(xp) else np.float32)
    finite = xp.isfinite(x)
    top = xp.max(xp.where(finite, x, -xp.inf), axis=1, keepdims=True)
    cdf = xp.cumsum(xp.where(finite, xp.exp(x - top), 0), axis=1)
    picked = xp.sum(cdf[:, None, :] <= (u * cdf[:, -1:])[:, :, None], axis=-1)
    return _output(picked, (batch, n), dtype)


def shuffle_order(key: Words, counter: Words, n: int) -> Any:
    """The row order ``RandomShuffle<T>`` gives ``n > 1`` rows from the stream at ``key``, ``counter``.
    A static key and counter (a constant seed) make it in numpy while tracing; a traced one in a loop."""
    w = quietly(lambda: words(key, counter, n - 1))
    if is_static(w):
        order, w = np.arange(n, dtype=np.int64), np.asarray(w, np.int64)
        for i in range(n - 1):  # (n - 1 swaps, as the kernel draws exactly n - 1 words)
            j = i + int(w[i] % (n - i))
            order[i], order[j] = order[j], order[i]
        return order
    w = jnp.asarray(w)

    def swap(i: Any, order: Any) -> Any:
        j = i + (w[i] % (n - i).astype(jnp.uint32)).astype(jnp.int32)
        return order.at[i].set(order[j]).at[j].set(order[i])

    return jax.lax.fori_loop(0, n - 1, swap, jnp.arange(n, dtype=jnp.int32))


def shuffles(value: Any) -> bool:
    """Whether ``RandomShuffle<T>`` permutes ``value``: it copies a tensor of at most one element or of
    at most one row (a scalar included) and draws nothing."""
    return np.ndim(value) > 0 and np.shape(value)[0] > 1 and np.size(value) > 1


@_reg("StatelessShuffle")
def _stateless_shuffle(node: Node, args: list[Any]) -> list[Any]:
    """``tf.random.experimental.stateless_shuffle`` (``StatelessShuffleOp``): the rows of input 0 in the
    order of :func:`shuffle_order` from the key and counter (inputs 1, 2; the algorithm, input 3, is
    checked first, as the kernel does)."""
    value = args[0]
    key, counter = key_counter_v2(node, args)
    if not shuffles(value):
        return [value]
    order = shuffle_order(key, counter, np.shape(value)[0])
    xp = np if is_static(value) and is_static(order) else jnp
    return [xp.take(value, order, axis=0)]
