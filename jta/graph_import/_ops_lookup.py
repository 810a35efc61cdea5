"""Lookups in the hash tables a function captures: ``tf.lookup`` tables and Keras ``IntegerLookup``.

A table is a resource that lives outside the graph: TensorFlow creates it eagerly (a ``StaticHashTable``
built inside a ``tf.function`` too: its creation is lifted out, only its initialization,
``LookupTableImportV2``, stays in the graph), the function captures its handle, and
``LookupTableFindV2`` reads it. JAX has no resources, so :func:`captured_tables` reads each captured
table once, at import (``LookupTableExportV2`` run eagerly on the handle, the constant keys and values of
the graph's own ``LookupTableImportV2`` added), into a :class:`Table` of numpy constants with its keys
sorted; the imported function hands the ops a placeholder for it, as it hands the summary ops one for a
writer (static, so loops and conds pass it through as constants). A find is then a binary search
(``searchsorted``) and a check that the key found is the key asked for, the default elsewhere: the
values TensorFlow's hash map gives, for keys of any shape, eagerly and under ``jit``.

What is imported is the table's contents at import: the imported function does not see later
inserts, and a function that changes a table (``insert``, ``remove``) is refused (``_tf2``'s list of
the ways out). Keys are integers: a table of strings (``StringLookup``, a vocabulary of words) is
refused with the way out, as JAX has no strings. TensorFlow differentiates none of these ops
(:mod:`._no_gradient`).

Without x64 JAX computes in int32, and an int64 key or value outside its range wraps (so does an id the
function is given): the table's keys that do are dropped (no wrapped id finds them), and the import warns
that such a table needs ``jax_enable_x64``; it cannot do better, since the ids reach the function already
wrapped. A ``DenseHashTable`` refuses to look up its two sentinel keys (``empty_key``, ``deleted_key``),
which its export mixes with the keys: they are read from the Python table, or, for one restored from a
SavedModel (no Python table holds them), from the node that created it (:func:`_creator`).
"""

from __future__ import annotations

import dataclasses
import gc
import warnings
from typing import Any, Optional

import jax
import jax.numpy as jnp
import numpy as np

from . import _ops_checks
from ._functions import CASE_OPS, IF_OPS, Body, Library, called
from ._messages import GraphError
from ._nodes import Node
from ._ops import OPS, is_static, registrar

_reg = registrar(OPS)

# the ops that read or change a table (their first input is its handle)
TABLE_OPS = ("LookupTableFindV2", "LookupTableSizeV2", "LookupTableImportV2", "LookupTableInsertV2",
             "LookupTableRemoveV2", "LookupTableExportV2")
# the ops that change one: the import refuses them (an ImportV2 of the table's own constants runs)
CHANGING_OPS = ("LookupTableInsertV2", "LookupTableRemoveV2", "InitializeTableV2",
                "InitializeTableFromTextFileV2", "HashTableV2", "MutableHashTableV2",
                "MutableHashTableOfTensorsV2", "MutableDenseHashTableV2")

_STRINGS = ("JAX has no strings: look the strings up outside the tf.function (the table, a StringLookup "
            "layer) and pass their ids as arguments, or use a table of integer keys and values")


@dataclasses.dataclass(eq=False)
class Table:
    """A captured table's contents at import: ``keys`` sorted (1-D), ``values[k]`` the value of
    ``keys[k]``; ``dense``: a ``DenseHashTable``, whose value shape the default gives (its export
    flattens it), and whose ``sentinels`` (its ``empty_key`` and ``deleted_key``) TensorFlow refuses to
    look up (``None``: unknown, and its lookups refused)."""

    name: str
    keys: np.ndarray
    values: np.ndarray
    dense: bool = False
    sentinels: Optional[dict[str, int]] = dataclasses.field(default_factory=dict)
    value_shape: Optional[tuple[int, ...]] = None
    size: Optional[int] = None  # (TensorFlow's, where the keys are not read, or do not give it)
    each_default: bool = False  # a default of the keys' shape is one for each key (else its first is taken)
    _narrow: Optional[tuple[np.ndarray, np.ndarray]] = None

    def for_jax(self) -> tuple[np.ndarray, np.ndarray]:
        """The keys and values as JAX computes with them: without x64 an int64 key outside int32's
        range equals no (int32) key JAX can be given, so it is dropped rather than wrapped onto one."""
        if self.keys.dtype != np.int64 or jax.dtypes.canonicalize_dtype(np.int64) == np.int64:
            return self.keys, self.values
        if self._narrow is None:
            inside = (self.keys >= np.iinfo(np.int32).min) & (self.keys <= np.iinfo(np.int32).max)
            self._narrow = (self.keys[inside].astype(np.int32), self.values[inside])
        return self._narrow


def _handle(table: Table) -> np.ndarray:
    """The placeholder the ops get for a table's handle: a 0-d object array (static)."""
    out = np.empty((), dtype=object)
    out[()] = table
    return out


def _table(node: Node, handle: Any) -> Table:
    table = handle[()] if isinstance(handle, np.ndarray) and handle.dtype == object else None
    if not isinstance(table, Table):
        GraphError.TF2_UNSUPPORTED.raise_(items=f"  - {node.op} {node.name}: its table is not one the function "
                                                "captures (jta reads captured tables of integer keys)")
    return table


# -- at import: the captured tables' contents ----------------------------------------------------------------
def _uses(lib: Library, body: Body, name: str, seen: set[tuple[str, str]]) -> list[tuple[Body, Node]]:
    """The table ops that the handle ``name`` of ``body`` reaches, through identities and into the
    functions the calls, conds and loops it feeds run."""
    if (body.name, name) in seen:
        return []
    seen.add((body.name, name))
    found = []
    for node in body.nodes.values():
        for k, (source, index) in enumerate(node.inputs):
            if source != name or index != 0:
                continue
            if node.op in TABLE_OPS:
                found.append((body, node))
            elif node.op == "Identity":
                found += _uses(lib, body, node.name, seen)
            else:
                skip = 1 if node.op in IF_OPS or node.op in CASE_OPS else 0  # (the predicate, the branch index)
                for fn in called(node, lib) if k >= skip else ():
                    inner = lib.body(fn)
                    if k - skip < len(inner.inputs):
                        found += _uses(lib, inner, inner.inputs[k - skip], seen)
    return found


def _constant(body: Body, tensor: tuple[str, int]) -> Optional[np.ndarray]:
    node = body.nodes.get(tensor[0])
    return np.asarray(node.attr("value")) if node is not None and node.op == "Const" else None


def captured_tables(lib: Library, top: Body, captures: list[tuple[Any, str]], tf: Any) -> dict[str, np.ndarray]:
    """The placeholders of the captured tables ``captures`` (eager handles and the names of their
    placeholders in ``top``) that table ops read, by placeholder name; a table of strings refused."""
    out = {}
    for ext, name in captures:
        uses = _uses(lib, top, name, set())
        typed = [node for _, node in uses if node.attr("Tin") is not None or node.attr("Tkeys") is not None]
        if not typed:
            if uses:  # (only its size is read: no dtype to export it with, nor need)
                out[name] = _handle(Table(name, np.zeros(0, np.int64), np.zeros(0), size=int(
                    np.asarray(tf.raw_ops.LookupTableSizeV2(table_handle=ext)))))
            continue
        node = typed[0]
        key_dtype, value_dtype = node.attr("Tin", node.attr("Tkeys")), node.attr("Tout", node.attr("Tvalues"))
        kinds = [d if isinstance(d, str) else np.dtype(d).name for d in (key_dtype, value_dtype)]
        if not isinstance(key_dtype, np.dtype) or not np.issubdtype(key_dtype, np.integer) or \
                not isinstance(value_dtype, np.dtype):
            GraphError.TF2_UNSUPPORTED.raise_(items=(
                f"  - the lookup table {name} ({node.op} {node.name}): keys {kinds[0]}, values {kinds[1]}; jta "
                f"imports tables of integer keys and numeric values. {_STRINGS}."))
        try:
            keys, values = (np.asarray(t) for t in tf.raw_ops.LookupTableExportV2(
                table_handle=ext, Tkeys=tf.as_dtype(key_dtype), Tvalues=tf.as_dtype(value_dtype)))
        except tf.errors.OpError:  # (a static table built inside the function and not yet run: the graph fills it)
            keys, values = np.zeros(0, key_dtype), np.zeros(0, value_dtype)
            table = Table(name, keys, values)
        else:
            table = _dense(ext, name, keys, values, tf) if keys.ndim == 2 else \
                Table(name, keys, values, each_default=values.ndim > 1 or _each_default(ext, keys, values.dtype, tf))
        # a table built inside the function: its initialization's constants
        imports = [(body, n) for body, n in uses if n.op == "LookupTableImportV2" and body is top]
        for body, n in imports:
            k, v = _constant(body, n.inputs[1]), _constant(body, n.inputs[2])
            if k is not None and v is not None:
                table.keys, table.values = np.concatenate([table.keys, k.reshape(-1)]), \
                    np.concatenate([table.values, v.reshape((k.size, *table.values.shape[1:]))])
        # sorted, each key once (the last value given for it: an import's over the export)
        last = len(table.keys) - 1 - np.unique(table.keys[::-1], return_index=True)[1]
        table.keys, table.values = table.keys[last], table.values[last]
        _warn_wide(table, node)
        out[name] = _handle(table)
    return out


def _warn_wide(table: Table, node: Node) -> None:
    """The warning that a table of int64 keys or values outside int32 gives other values than TensorFlow's
    without x64 (its ids past int32 wrap, onto its other keys or none: no check can see them, as JAX wraps
    them before the function does)."""
    if jax.dtypes.canonicalize_dtype(np.int64) == np.int64:
        return
    low, high = np.iinfo(np.int32).min, np.iinfo(np.int32).max
    wide = [f"{int(np.sum((a < low) | (a > high)))} of its {a.size} int64 {what}" for what, a in
            (("keys", table.keys), ("values", table.values)) if a.dtype == np.int64 and a.size and
            (a.min() < low or a.max() > high)]
    if wide:
        warnings.warn(f"the lookup table {table.name} ({node.op} {node.name}) holds {' and '.join(wide)} outside "
                      "int32, and JAX's x64 is off: JAX computes int64 as int32, so an id past int32 wraps (onto "
                      "another key, or none) and so does a value: such lookups give other values than "
                      "TensorFlow's. Turn x64 on before importing and calling: "
                      "jax.config.update(\"jax_enable_x64\", True).",
                      stacklevel=5)


def _each_default(ext: Any, keys: np.ndarray, dtype: np.dtype, tf: Any) -> bool:
    """Whether the table takes a default for each key (a ``MutableHashTable``) rather than only the first
    (a ``StaticHashTable``), which both accept: asked of TensorFlow's kernel, with a key it lacks."""
    absent = np.setdiff1d(np.arange(len(keys) + 1), keys)[0]
    found = tf.raw_ops.LookupTableFindV2(table_handle=ext, keys=np.full(2, absent, keys.dtype),
                                         default_value=np.arange(2).astype(dtype))
    return bool(np.asarray(found)[1] == 1)


def _dense(ext: Any, name: str, keys: np.ndarray, values: np.ndarray, tf: Any) -> Table:
    """A ``DenseHashTable``'s export (its buckets: the empty ones hold the empty key, the erased ones the
    deleted key) as a table: its sentinels and value shape from the Python table that owns the handle, or,
    where none does (a restored SavedModel's), from the node that created it. Where neither gives them
    the keys that repeat are still sentinels, but an erased key's bucket is seen once, as a key's is, and
    the deleted key may be in none: its lookups are refused (``sentinels`` None), its size TensorFlow's."""
    if keys.shape[1] != 1:
        GraphError.TF2_UNSUPPORTED.raise_(items=f"  - the lookup table {name}: keys of shape {keys.shape[1:]} "
                                                "(jta imports tables of scalar keys)")
    keys = keys[:, 0]
    owners = [r for r in gc.get_referrers(ext) if isinstance(r, tf.lookup.experimental.DenseHashTable)]
    size = None
    if owners:
        sentinels: Optional[dict[str, int]] = {"empty_key": int(np.asarray(owners[0]._empty_key)),
                                               "deleted_key": int(np.asarray(owners[0]._deleted_key))}
        shape: Optional[tuple[int, ...]] = tuple(owners[0]._value_shape.as_list())
    else:
        sentinels, shape = _creator(ext, tf)
    if sentinels is None:
        seen, counts = np.unique(keys, return_counts=True)
        real = ~np.isin(keys, seen[counts > 1])
        size = int(np.asarray(tf.raw_ops.LookupTableSizeV2(table_handle=ext)))
    else:
        real = ~np.isin(keys, list(sentinels.values()))
    values = values[real]
    if shape is not None:
        values = values.reshape((len(values), *shape))
    return Table(name, keys[real], values, dense=True, sentinels=sentinels, value_shape=shape, size=size)


def _creator(ext: Any, tf: Any) -> tuple[Optional[dict[str, int]], Optional[tuple[int, ...]]]:
    """A restored ``DenseHashTable``'s sentinels and value shape, from the ``MutableDenseHashTableV2`` node
    that creates it: loading the SavedModel put its functions in TensorFlow's eager context (they stay there
    when the loaded object is gone), the restored table's creator among them, with its ``empty_key`` and
    ``deleted_key`` as constants; the handle names the node (its ``shared_name``, unique to each load).
    ``(None, None)`` unless exactly one such node, of constant sentinels, is found."""
    from tensorflow.python.eager import context

    name = _handle_name(ext, tf)
    if not name:
        return None, None
    ctx = context.context()
    if ctx is None:
        return None, None
    found = set()
    for function in ctx.list_function_names():
        nodes = {n.name: n for n in ctx.get_function_def(function).node_def}
        for n in nodes.values():
            if n.op != "MutableDenseHashTableV2" or n.attr["shared_name"].s != name:
                continue
            given = [nodes.get(i.split(":")[0]) for i in n.input[:2]]  # (a FunctionDef's "node:output:0")
            keys = [tf.make_ndarray(g.attr["value"].tensor).reshape(-1) for g in given
                    if g is not None and g.op == "Const"]
            shape = n.attr["value_shape"].shape
            dims = None if shape.unknown_rank or any(d.size < 0 for d in shape.dim) else \
                tuple(d.size for d in shape.dim)
            found.add(None if len(keys) != 2 or any(k.size != 1 for k in keys) else
                      (int(keys[0][0]), int(keys[1][0]), dims))
    if len(found) != 1 or None in found:
        return None, None
    [(empty, deleted, dims)] = found
    return {"empty_key": empty, "deleted_key": deleted}, dims


def _handle_name(ext: Any, tf: Any) -> Optional[bytes]:
    """The name an eager resource handle carries: TensorFlow serializes a handle's tensor as a varint
    length then its ``ResourceHandleProto``."""
    from google.protobuf.message import DecodeError
    from tensorflow.core.framework import resource_handle_pb2, tensor_pb2

    try:
        serialized = tf.io.serialize_tensor(ext).numpy()
        content = tensor_pb2.TensorProto.FromString(serialized).tensor_content  # pyright: ignore[reportAttributeAccessIssue]
    except (tf.errors.OpError, DecodeError, TypeError, ValueError):
        return None
    size, pos = 0, 0
    while pos < min(len(content), 5):
        size |= (content[pos] & 0x7F) << (7 * pos)
        pos += 1
        if content[pos - 1] < 0x80:
            break
    try:
        proto = resource_handle_pb2.ResourceHandleProto  # pyright: ignore[reportAttributeAccessIssue]
        return proto.FromString(content[pos:pos + size]).name.encode()
    except DecodeError:
        return None


# -- the ops -------------------------------------------------------------------------------------------------
def _value_shape(node: Node, table: Table, keys: Any, default: Any) -> tuple[int, ...]:
    """The shape of one value; TensorFlow's check of the default's shape: that (one default) or the
    keys' then that (a default for each key)."""
    shape = table.value_shape if table.value_shape is not None else tuple(table.values.shape[1:])
    given = tuple(np.shape(default))
    if table.dense and table.value_shape is None:  # (an export flattens a dense table's values)
        shape = given if int(np.prod(given)) == int(np.prod(shape)) else shape
    each = (*np.shape(keys), *shape)
    if given not in (shape, each):
        _ops_checks.invalid(node, f"Expected shape [{_ops_checks.dims(shape)}] or [{_ops_checks.dims(each)}] "
                                  f"for default value, got [{_ops_checks.dims(given)}]")
    return shape


@_reg("LookupTableFindV2")
def _find(node: Node, args: list[Any]) -> list[Any]:
    """``table.lookup(keys)``: each key's value, ``default_value`` where the table has none (the output's
    shape is the keys' then a value's). A default for each key is taken as TensorFlow's kernels take
    it: a mutable table's each key's, a static or dense one's first."""
    table, keys, default = _table(node, args[0]), args[1], args[2]
    if table.sentinels is None:
        GraphError.TF2_UNSUPPORTED.raise_(items=(
            f"  - {node.op} {node.name}: a lookup in the DenseHashTable {table.name} restored from a SavedModel, "
            "whose empty_key and deleted_key jta could not read (TensorFlow refuses to look them up, and "
            "its export cannot tell an erased key's deleted_key from a key): import it while TensorFlow "
            "still holds the SavedModel's functions (jta.import_saved_model does), or look it up outside "
            "the tf.function"))
    shape = _value_shape(node, table, keys, default)
    if table.dense and any(d != 1 for d in np.shape(keys)[1:]):  # (its kernel takes a batch of scalar keys)
        _ops_checks.invalid(node, f"Expected key shape [{np.shape(keys)[0]}] got [{_ops_checks.dims(np.shape(keys))}]")
    static = is_static(keys) and is_static(default)
    xp = np if static else jnp
    if table.sentinels:  # (TensorFlow's kernel stops at the first key that is one: that one's text)
        kp = np if is_static(keys) else jnp
        flat = kp.reshape(kp.asarray(keys), -1)
        info = np.iinfo(flat.dtype)  # (without x64 a sentinel outside int32 is no id JAX is given)
        hits = [flat == s if info.min <= s <= info.max else kp.zeros(flat.shape, bool)
                for s in (table.sentinels["empty_key"], table.sentinels["deleted_key"])]
        # (the index of each one's first, the keys' count where none is: the one found first is before the other)
        empty, deleted = (kp.argmax(kp.append(hit, True)) for hit in hits)
        for what, bad in (("empty_key", empty < deleted), ("deleted_key", deleted < empty)):
            _ops_checks.invalid_where(node, bad, f"Using the {what} as a table key is not allowed")
    sorted_keys, values = (table.keys, table.values) if static else table.for_jax()
    values = values.reshape((len(values), *shape))
    keys = xp.asarray(keys)
    out_shape = (*np.shape(keys), *shape)
    if np.shape(default) != shape and not table.each_default:  # (the first of a default for each key)
        default = xp.reshape(default, (-1, *shape))[0]
    if len(sorted_keys) == 0:
        return [xp.broadcast_to(default, out_shape)]
    at = xp.clip(xp.searchsorted(sorted_keys, keys), 0, len(sorted_keys) - 1)
    found = (xp.asarray(sorted_keys)[at] == keys).reshape((*np.shape(keys), *(1,) * len(shape)))
    return [xp.where(found, xp.asarray(values)[at], default)]


@_reg("LookupTableSizeV2")
def _size(node: Node, args: list[Any]) -> list[Any]:
    """``table.size()``: how many keys the table holds (int64)."""
    table = _table(node, args[0])
    return [np.asarray(len(table.keys) if table.size is None else table.size, np.int64)]


@_reg("LookupTableImportV2")
def _import(node: Node, args: list[Any]) -> list[Any]:
    """The initialization of a table built inside the function: nothing, where its keys and values are
    the ones the import read into the table (its constants); other ones are refused."""
    table, keys, values = _table(node, args[0]), args[1], args[2]
    if is_static(keys) and is_static(values):
        keys = np.asarray(keys).reshape(-1)
        at = np.clip(np.searchsorted(table.keys, keys), 0, max(len(table.keys) - 1, 0))
        if len(table.keys) and np.all(table.keys[at] == keys) and \
                np.array_equal(table.values[at], np.asarray(values).reshape(table.values[at].shape)):
            return []
    GraphError.TF2_UNSUPPORTED.raise_(items=f"  - {node.op} {node.name}: a table initialized with values the "
                                            "import does not know (not constants of the function): build the "
                                            "table outside the tf.function, or of constants")
