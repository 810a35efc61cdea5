"""``jax.export`` serialization of jta's pytrees, so that an exported function may take and
return TensorArrays, raw-op states and error records, and be called in another process.

Each node's static data is written as JSON: an array's metadata (:class:`ArrayMeta`), a
state's name counter and accumulator keys, an error record's sites.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import jax
import jax.numpy as jnp

from ._core.array import ArrayMeta
from ._delivery.api import ErrorRecord
from ._records.primitives import sites_from_bytes, sites_to_bytes
from .raw_ops import State
from .tensor_array import TensorArray


def _shape(shape: Any) -> Any:
    return None if shape is None else tuple(shape)


def meta_to_bytes(meta: ArrayMeta) -> bytes:
    fields = dataclasses.asdict(meta)
    fields["dtype"] = jnp.dtype(meta.dtype).name
    return json.dumps(fields).encode()


def meta_from_bytes(data: bytes) -> ArrayMeta:
    fields = json.loads(data.decode())
    if "is_grad" in fields:  # written before the field was renamed is_accumulator
        fields["is_accumulator"] = fields.pop("is_grad")
    fields["dtype"] = jnp.dtype(fields["dtype"])
    for key in ("element_shape", "python_shape"):
        fields[key] = _shape(fields[key])
    if fields["slots"] is not None:
        fields["slots"] = tuple((bits, _shape(shape)) for bits, shape in fields["slots"])
    return ArrayMeta(**fields)


jax.export.register_pytree_node_serialization(TensorArray, serialized_name="jta.TensorArray",
                                              serialize_auxdata=meta_to_bytes, deserialize_auxdata=meta_from_bytes)
def state_to_bytes(aux: tuple[int, tuple[tuple[str, str], ...]]) -> bytes:
    return json.dumps(aux).encode()


def state_from_bytes(data: bytes) -> tuple[int, tuple[tuple[str, str], ...]]:
    counter, keys = json.loads(data.decode())
    return counter, tuple((name, source) for name, source in keys)


jax.export.register_pytree_node_serialization(State, serialized_name="jta.raw_ops.State",
                                              serialize_auxdata=state_to_bytes, deserialize_auxdata=state_from_bytes)
jax.export.register_pytree_node_serialization(ErrorRecord, serialized_name="jta.ErrorRecord",
                                              serialize_auxdata=sites_to_bytes, deserialize_auxdata=sites_from_bytes)
