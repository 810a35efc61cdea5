"""Optionals (``OptionalFromValue``/``OptionalNone``): what a cond inside a loop hands its gradient,
and how the branches of a run-time cond come to give optionals of one structure."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Optional

import jax
import jax.numpy as jnp
import numpy as np

from . import _lists, _ops_checks
from ._list_value import from_key, value_key
from ._nodes import Node
from ._ops import is_static

__all__ = ["Opt", "agreed", "as_jax", "fill_optionals", "fits", "kind_of", "static_leaves"]


@jax.tree_util.register_pytree_node_class
class Opt:
    """An optional (``OptionalFromValue``/``OptionalNone``): what a cond inside a loop hands its gradient
    (the intermediates of the branch taken). ``value`` is a tuple of values or None; ``has`` a bool.

    TF's cond gives each branch's intermediates the same optional slots, so one slot may hold values
    of different types in different branches (an optional is a variant). After a ``lax.switch``
    such a slot is a union: ``kinds`` lists the types it holds (:func:`kind_of`), and ``value`` one
    part per kind, the taken branch's value in its own, zeros in the others; ``OptionalGetValue``
    reads the part of the type it asks for. Where several fit (lists, which are all variants), the
    read is in the gradient's branch of the same index (TensorFlow reads a branch's intermediates in
    its gradient's branch only): ``owners`` (the branch count, and per kind the branches that give
    it) picks the part."""

    def __init__(self, value: Optional[tuple[Any, ...]], has: Any, kinds: Optional[tuple[Any, ...]] = None,
                 owners: Optional[tuple[int, tuple[frozenset[int], ...]]] = None):
        self.value, self.has, self.kinds, self.owners = value, has, kinds, owners

    def tree_flatten(self) -> tuple[tuple[Any, ...], Any]:
        return (self.value, self.has), (self.kinds, self.owners)

    @classmethod
    def tree_unflatten(cls, aux: Any, children: Any) -> Opt:
        return cls(*children, kinds=aux[0], owners=aux[1])

    def read(self, node: Node, branch: Optional[tuple[int, int]]) -> list[Any]:
        """``OptionalGetValue`` of it (``node``'s ``output_types``/``output_shapes`` choose the part;
        ``branch``, the innermost branch running and the count of its cond's branches, where they do not)."""
        if self.value is None:
            _ops_checks.invalid(node, "The optional variant has no value.")
        if self.kinds is None:
            return list(self.value)
        types, shapes = node.attr("output_types", []), node.attr("output_shapes", [])
        fitting = [k for k, kind in enumerate(self.kinds) if fits(kind, types, shapes)]
        if len(fitting) > 1 and branch is not None and self.owners is not None and branch[1] == self.owners[0]:
            fitting = [k for k in fitting if branch[0] in self.owners[1][k]]
        found = [self.value[k] for k in fitting]
        if len(found) != 1:
            _ops_checks.invalid(node, (
                f"the optional holds one of {len(self.kinds)} types, and {len(found)} of them are {types} {shapes}"))
        return list(found[0])


def kind_of(value: tuple[Any, ...]) -> Any:
    """An optional value's type: its tree structure and the shape and dtype of each leaf."""
    leaves, tree = jax.tree_util.tree_flatten(value)
    return tree, tuple((tuple(np.shape(x)), jnp.result_type(x)) for x in leaves), tuple(
        (np.dtype(jnp.result_type(v)), tuple(np.shape(v))) if not isinstance(v, (_lists.TList, Opt)) else None
        for v in value)


def fits(kind: Any, types: list[Any], shapes: list[Any]) -> bool:
    """Whether values of ``kind`` are what an ``OptionalGetValue`` of ``types`` and ``shapes`` reads."""
    values = kind[2]
    if len(values) != len(types):
        return False
    for k, (value, dtype) in enumerate(zip(values, types, strict=True)):
        if value is None or not isinstance(dtype, np.dtype):  # a list or an optional: a variant
            if (value is None) != (not isinstance(dtype, np.dtype)):
                return False
            continue
        shape = shapes[k] if k < len(shapes) else None
        if value[0] != jax.dtypes.canonicalize_dtype(dtype) or (shape is not None and (len(shape) != len(value[1]) or any(
                d is not None and d != n for d, n in zip(shape, value[1], strict=True)))):
            return False
    return True


def as_jax(values: list[Any]) -> list[Any]:
    """Branch outputs as JAX values (``lax.cond`` needs matching array leaves, not numpy constants)."""
    return [v if isinstance(v, _lists.TList) else Opt(v.value, jnp.asarray(v.has), v.kinds, v.owners) if isinstance(v, Opt)
            else jnp.asarray(v) for v in values]


def fill_optionals(fns: list[Callable[[], list[Any]]]) -> list[Callable[[], list[Any]]]:
    """Branches whose optionals agree in type slot by slot, so that every branch gives outputs of one
    structure (a ``lax.switch`` needs that): an empty optional (``OptionalNone``) holds zeros of the
    type the other branches' values at its slot have, and a slot whose values differ in type from
    branch to branch is a union of them (:class:`Opt`'s ``kinds``)."""
    shapes = [jax.eval_shape(fn) for fn in fns]
    kinds: dict[int, list[Any]] = {}
    templates: dict[tuple[int, Any], Any] = {}
    owners: dict[tuple[int, Any], set[int]] = {}
    for k, outs in enumerate(shapes):
        for j, v in enumerate(outs):
            if isinstance(v, Opt) and v.value is not None:
                kind = kind_of(v.value)
                if kind not in kinds.setdefault(j, []):
                    kinds[j].append(kind)
                    templates[j, kind] = v.value
                owners.setdefault((j, kind), set()).add(k)

    def zeros(j: int, kind: Any) -> Any:
        return jax.tree_util.tree_map(lambda t: jnp.zeros(t.shape, t.dtype), templates[j, kind])

    def slot(j: int, v: Any) -> Any:
        if not isinstance(v, Opt) or j not in kinds:
            return v
        if len(kinds[j]) == 1:
            return v if v.value is not None else Opt(zeros(j, kinds[j][0]), v.has)
        mine = None if v.value is None else kind_of(v.value)
        parts = tuple(v.value if kind == mine else zeros(j, kind) for kind in kinds[j])
        return Opt(parts, v.has, kinds=tuple(kinds[j]),
                   owners=(len(fns), tuple(frozenset(owners[j, kind]) for kind in kinds[j])))

    def filled(fn: Callable[[], list[Any]]) -> Callable[[], list[Any]]:
        return lambda: [slot(j, v) for j, v in enumerate(fn())]
    return [filled(fn) for fn in fns]


Leaf = tuple[int, int]  # (output, leaf of an optional's value; -1: the output itself)


def static_leaves(outs: list[Any]) -> dict[Leaf, Any]:
    """A branch's outputs' static leaves (their ``value_key``; None where traced): of each optional that
    holds a value, and of each output that is a tensor."""
    seen: dict[Leaf, Any] = {}
    for j, v in enumerate(outs):
        if isinstance(v, Opt):
            if v.value is not None:
                seen.update({(j, i): value_key(x) if is_static(x) else None
                             for i, x in enumerate(jax.tree_util.tree_leaves(v.value))})
        elif not isinstance(v, _lists.TList):
            seen[j, -1] = value_key(v) if is_static(v) else None
    return seen


def agreed(outs: list[Any], branches: list[dict[Leaf, Any]]) -> list[Any]:
    """A ``lax.switch``'s ``outs``, static where every branch's (:func:`static_leaves`) is the same static
    value: a tensor every branch gives, and an optional's leaf every branch that gives a value gives (the
    others' is never read). pfor's transpose permutations reach a loop's gradient so, through a cond."""
    def one(keys: list[Any]) -> Any:
        return keys[0] if keys and keys[0] is not None and all(k == keys[0] for k in keys) else None

    outs = list(outs)
    for j, out in enumerate(outs):
        if isinstance(out, Opt) and out.kinds is None and out.value is not None:
            leaves, tree = jax.tree_util.tree_flatten(out.value)
            keys = [one([b[j, i] for b in branches if (j, i) in b]) for i in range(len(leaves))]
            if any(k is not None for k in keys):
                value = [leaf if k is None else from_key(k) for leaf, k in zip(leaves, keys, strict=True)]
                outs[j] = Opt(jax.tree_util.tree_unflatten(tree, value), out.has, out.kinds, out.owners)
        elif not isinstance(out, (Opt, _lists.TList)):
            key = one([b.get((j, -1)) for b in branches])
            if key is not None and all((j, -1) in b for b in branches):
                outs[j] = from_key(key)
    return outs
