"""The values a converted loop carries, and the state of a stateful op under a run-time condition.

:class:`Dyn` and :data:`DEAD` stand for values partial evaluation does not know or that a static
``Switch`` left untaken; the functions compare the structure of what a loop's step gives back
with what it was given (a ``lax`` loop's carry keeps it), and :func:`select` chooses between the
resources with and without an update (a stateful op or a loop in a branch taken at run time).
"""

from __future__ import annotations

import dataclasses
from typing import Any, Optional

import jax
import jax.numpy as jnp
import numpy as np
from jax.core import Tracer

from .. import raw_ops
from .._core.array import empty as empty_array
from ._frames import Frame
from ._messages import GraphError
from ._resources import Resources, Stack


# The values of a runner's environment besides arrays and handles (the conds of
# jta.graph_import._control_flow read and write them too).
class _Marker:
    def __init__(self, name: str):
        self.name = name

    def __repr__(self) -> str:
        return self.name


DEAD = _Marker("DEAD")  # the untaken side of a Switch with a static predicate


@dataclasses.dataclass(frozen=True)
class Dyn:
    """A value unknown during partial evaluation (its shape when known)."""

    shape: Optional[tuple[int, ...]] = None


def concrete(*trees: Any) -> bool:
    """Whether no leaf of ``trees`` is traced (an eager call, outside any transformation)."""
    return not any(isinstance(leaf, Tracer) for leaf in jax.tree.leaves(trees))


def unwritten(ta: Any) -> bool:
    """Whether ``ta`` is an array of unknown element shape (slots form) that nothing has written yet."""
    meta = ta.tree_flatten()[1]
    return meta.slots is not None and all(shape is None for _, shape in meta.slots)


def dense_like(ta: Any, written: Any) -> Any:
    """The unwritten ``ta`` made dense with the element shape its first write in a loop body gives it
    (``written``, from the discovery trace): the loop's carry then keeps its structure (a ``lax.scan``
    instead of an unrolled loop, as for ``tf.map_fn``'s result array)."""
    leaves, meta = ta.tree_flatten()
    dense = dataclasses.replace(meta, element_shape=written.tree_flatten()[1].element_shape, slots=None)
    return empty_array(type(ta), dense, len(meta.slots)).replace(traced_size=leaves[2], flow=leaves[4])


def shape_of(v: Any) -> Optional[tuple[int, ...]]:
    return v.shape if isinstance(v, Dyn) else (None if isinstance(v, str) or v is DEAD else tuple(np.shape(v)))


def same_value(a: Any, b: Any) -> bool:
    return np.array_equal(a, b) and np.asarray(a).dtype == np.asarray(b).dtype


def structure(tree: Any) -> Any:
    """The tree structure and the shapes and dtypes of its leaves: what a loop carry must keep."""
    return jax.tree.structure(tree), [aval(leaf) for leaf in jax.tree.leaves(tree)]


def aval(x: Any) -> Any:
    # The canonical dtype: a static int64 (the lengths of a concat pushed in line) is traced as int32 without x64.
    dtype = getattr(x, "dtype", None)
    return (tuple(np.shape(x)), str(type(x)) if dtype is None else str(jax.dtypes.canonicalize_dtype(dtype)))


def as_array(v: Any) -> Any:
    return jnp.asarray(v)


def like(v: Any, like: Any, f: Frame, var: str) -> Any:
    """``v``, the next value of the loop variable ``var`` of ``f``, with the dtype of ``like`` (its value now),
    or a refusal when the shapes differ (a lax loop's carry keeps its shape)."""
    if isinstance(v, str) or v is DEAD or np.shape(v) != np.shape(like):
        # TensorFlow's gradient loop (it pops the forward loop's stacks) grows the IndexedSlices of a gather's
        # gradient (embedding_lookup) each step: JAX's reverse mode of the imported forward keeps shapes static.
        grad = (" It is TensorFlow's gradient loop (it pops the forward loop's stacks), where the gradient of a "
                "gather (embedding_lookup) grows its IndexedSlices each step: jax.grad of the imported forward graph "
                "gives TensorFlow's gradient under jax.jit (where the forward loops have a static trip count or "
                "bound, e.g. maximum_iterations=)." if f.pops else "")
        GraphError.LOOP_STRUCTURE.raise_(frame=f.name, what=f"a loop variable changes shape from {np.shape(like)} "
                                          f"to {shape_of(v)} (shape invariants are supported only outside jax.jit, "
                                          f"where the loop runs step by step; the variable's Merge node: {var}).{grad}")
    return jnp.asarray(v, like.dtype)


def select(ok: Any, new: Resources, old: Resources, made_here: frozenset[str] = frozenset()
           ) -> tuple[Optional[Resources], str]:
    """``new`` where ``ok`` holds and ``old`` elsewhere (the update of a stateful op, or of a loop, under
    a run-time condition), or None and what changed when the two differ in structure.

    Only the leaves that changed are selected (selecting every array and stack would add whole-buffer
    work to each guarded op). An array, accumulator or stack created on the way is kept either way
    (nothing outside the branch names it), and so are the arrays in ``made_here`` and their
    accumulators, whatever their structure: their ``TensorArrayV3`` runs under ``ok`` too, so where
    ``ok`` does not hold nothing reads them (``tf.map_fn`` in a branch: its arrays are the branch's own).
    A stack buffer that grew by a slot in line keeps the new buffer, whose selected top says which
    slots hold values."""
    arrays = {**{h: a for h, a in new.arrays.arrays.items() if h not in old.arrays.arrays}, **old.arrays.arrays,
              **{h: a for h, a in new.arrays.arrays.items() if h in made_here}}
    grads = {**{k: a for k, a in new.arrays.grads.items() if k not in old.arrays.grads}, **old.arrays.grads,
             **{k: a for k, a in new.arrays.grads.items() if k[0] in made_here}}
    stacks = {**{h: s for h, s in new.stacks.items() if h not in old.stacks}, **old.stacks}
    for handle, stack in new.stacks.items():
        before = stacks[handle]
        if before.data is not None and stack.data is not None and not stack.items and not before.items and (
                np.shape(before.data) != np.shape(stack.data) or before.data is not stack.data):
            # A push writes the slot at the top: where it did not happen, that slot lies above the selected
            # top, free, so the new buffer serves both ways (only the top is selected, not the whole buffer).
            stacks[handle] = Stack((), stack.data, before.top)
    old = Resources(raw_ops.State(arrays, grads, old.arrays.counter), stacks)
    if jax.tree.structure(new) != jax.tree.structure(old) or any(
            np.shape(a) != np.shape(b) for a, b in zip(jax.tree.leaves(new), jax.tree.leaves(old), strict=True)):
        return None, change(new, old)
    return jax.tree.map(lambda a, b: a if a is b else jnp.where(ok, a, b), new, old), ""


def change(new: Resources, old: Resources) -> str:
    """What a stateful op or a loop changed in the structure of the resources, in words."""
    for handle, array in new.arrays.arrays.items():
        if layout(array) != layout(old.arrays.arrays.get(handle)):
            return (f"it changes the static structure of TensorArray {handle} (a first write fixes an element "
                    f"shape the array was created without, or a dynamic_size array grows)")
    for key, array in new.arrays.grads.items():
        if layout(array) != layout(old.arrays.grads.get(key)):
            return f"it changes the static structure of the gradient TensorArray {key[1]!r} of {key[0]}"
    for handle, stack in new.stacks.items():
        if layout(stack) != layout(old.stacks.get(handle)):
            return f"it changes the static structure of stack {handle}"
    return "it changes the static structure of the TensorArrays or stacks"


def layout(tree: Any) -> Any:
    return jax.tree.structure(tree), [np.shape(leaf) for leaf in jax.tree.leaves(tree)]
