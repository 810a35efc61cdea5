"""The branches of an ``If``/``Case`` whose predicate is known only at run time, made to agree.

A ``lax.switch`` needs every branch to give outputs of one structure, shape and dtype. TensorFlow's
branches may give TensorLists that differ: a branch that writes a list (the filter idiom, ``if x > 0:
ta = ta.write(j, x)``) and one that passes it on give lists of different lengths, with a buffer or
without one yet. Such lists become one buffer of the most rows any branch has (the rows past a
list's length zeros, as unset elements read) and a length known at run time, as a loop's carried
lists are; a list whose elements are kept one by one joins where its set ones have the buffer's shape.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Optional

import jax
import jax.numpy as jnp

from ._lists import VARIANT, TList, is_full, rows

__all__ = ["lists_agree"]


def lists_agree(fns: list[Callable[[], list[Any]]]) -> list[Callable[[], list[Any]]]:
    """``fns`` (the branches) with each output slot whose TensorLists differ from branch to branch
    given as one buffer and a traced length; other outputs as they are (a mismatch left is
    ``lax.switch``'s to report)."""
    shapes = [jax.eval_shape(fn) for fn in fns]
    targets: dict[int, Callable[[TList], TList]] = {}
    for j in range(min(len(outs) for outs in shapes)):
        lists = [outs[j] for outs in shapes]
        if all(isinstance(v, TList) for v in lists) and not _alike(lists):
            target = _common(lists)
            if target is not None:
                targets[j] = target

    def agreeing(fn: Callable[[], list[Any]]) -> Callable[[], list[Any]]:
        return lambda: [targets[j](v) if j in targets else v for j, v in enumerate(fn())]
    return [agreeing(fn) for fn in fns] if targets else fns


def _alike(lists: list[TList]) -> bool:
    first = jax.tree_util.tree_structure(lists[0])
    return all(jax.tree_util.tree_structure(v) == first for v in lists) and len(
        {tuple((x.shape, x.dtype) for x in jax.tree_util.tree_leaves(v)) for v in lists}) == 1


def _common(lists: list[TList]) -> Optional[Callable[[TList], TList]]:
    """How to give each branch's list the one type they can all have, or ``None`` when there is none."""
    first = lists[0]
    if first.dtype == VARIANT or any(v.dtype != first.dtype for v in lists):
        return None
    elements = {tuple(v.items.shape[1:]) for v in lists if v.items is not None} | {
        tuple(p.shape) for v in lists for p in v.parts or () if p is not None}
    if len(elements) > 1:
        return None
    element = next(iter(elements)) if elements else first.shape
    if element is None or not is_full(element) or len({v.limit for v in lists}) > 1:
        return None
    width = max([rows(v.items) for v in lists if v.items is not None] + [v.rows_hint or 0 for v in lists]
                + [v.length for v in lists if isinstance(v.length, int)])
    plans = {v.plan for v in lists} - {None}
    if len(plans) > 1:
        return None
    plan = next(iter(plans)) if plans else None
    consts = {repr(v.const) for v in lists}
    const = first.const if len(consts) == 1 else None
    shape = first.shape if len({v.shape for v in lists}) == 1 else tuple(element)

    def conform(lst: TList) -> TList:
        items = lst.items if lst.items is not None else jnp.zeros((0, *element), lst.dtype)
        if lst.parts is not None:  # elements one by one (a static length): one buffer, unset ones zeros
            items = jnp.stack([jnp.zeros(element, lst.dtype) if p is None else p for p in lst.parts]) \
                if lst.parts else items
        if items.shape[0] < width:
            items = jnp.concatenate([items, jnp.zeros((width - items.shape[0], *element), items.dtype)])
        return TList(items, jnp.asarray(lst.length, jnp.int32), lst.dtype, shape, const=const, limit=lst.limit,
                     plan=plan)
    return conform
