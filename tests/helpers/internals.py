"""Every access the tests make to jta's private names, in one place.

jta's internals move: when a private name changes, update it here and nowhere else. No test module touches an underscore name of jta
(``ta._data``, ``jta._display``, ...) except through this module; the functions import lazily, so a
moved name breaks only the tests that use it, at run time, with this file in the traceback.

What is used, and by whom:

* the pytree leaves of a ``jta.TensorArray``: :func:`buffer_of` (``ta._data``),
  :func:`flags_of` (``ta._flags``), :func:`error_of` (``ta._record``) — ``test_donation.py``,
  ``test_sharding.py``;
* :func:`static_size` (``jta._core.array.require_static_size``) and :func:`peek` (``jta._core.kernels.read``) —
  the drivers in ``tests/helpers/drivers.py``;
* ``jta._display`` (:func:`repr_legend`, :func:`repr_codes`, :func:`max_slots_html`,
  :func:`array_html`) and ``jta._describe`` (:func:`description_type`) — ``test_repr.py``;
* ``jta._records.catalogue`` (:func:`value_dependent_templates`) — ``tests/oracle/_programs.py``;
* ``jta._core.shapes`` (:func:`as_shape`, :func:`shape_compatible`, :func:`shape_debug_str`,
  :func:`shape_fully_defined`) — ``tests/oracle/_tf_cases.py``;
* ``jta._core.memory`` (:func:`set_memory_limit`) — ``test_inputs.py``;
* the ``jta_check`` primitive (:func:`checks_in`) — ``test_reporting_once.py``; the interpreter's
  rules (:func:`functionalize_rules`) — ``test_primitive_inventory.py``.
"""

from __future__ import annotations

import importlib
from typing import Any


def _module(name: str) -> Any:
    return importlib.import_module(f"jta.{name}")


# -- a TensorArray's leaves --------------------------------------------------------------------

def buffer_of(ta: Any) -> Any:
    """The data buffer leaf (``[capacity, *element_shape]``, or the slots of a ragged array)."""
    return ta._data


def flags_of(ta: Any) -> Any:
    """The per-slot flags leaf (written / read bits and sticky error bits)."""
    return ta._flags


def error_of(ta: Any) -> Any:
    """The recorded-error leaf (``None`` when the array records none)."""
    return ta._record


# -- TensorArray methods the drivers need --------------------------------------------------------

def static_size(ta: Any, what: str) -> int:
    """The size as a Python int (``what`` names the op in the error when it is not static)."""
    return _module("_core.array").require_static_size(ta, what)


def peek(ta: Any, index: Any) -> Any:
    """The value at ``index`` without marking the slot read (a read TF never runs)."""
    return _module("_core.kernels").read(ta, index, mark=False)[1]


# -- jta._display ------------------------------------------------------------------------------------

def repr_legend() -> str:
    """The legend line under a text repr."""
    return _module("_display").LEGEND


def repr_codes() -> dict:
    """Slot code -> (description, colour) of the reprs."""
    return _module("_display").CODES


def max_slots_html() -> int:
    """How many slot boxes the HTML repr draws at most."""
    return _module("_display").MAX_SLOTS_HTML


def array_html(ta: Any) -> str:
    """The HTML repr of one array."""
    return _module("_display").array_html(ta)


def description_type() -> type:
    """The class of what ``jta.describe`` returns."""
    return _module("_describe").Description


# -- jta._records.records ----------------------------------------------------------------------------------

def value_dependent_templates() -> list[str]:
    """The message templates (``{field}`` placeholders) of the errors jta records in the state at
    traced values instead of raising."""
    return [e.template for e in _module("_records.catalogue").Error if e.fields]


# -- jta._core.shapes ----------------------------------------------------------------------------------

def as_shape(shape: Any) -> Any:
    """jta's normal form of a (partial) shape: ``None`` or a tuple of ints / ``None``."""
    return _module("_core.shapes").as_shape(shape)


def shape_compatible(a: Any, b: Any) -> bool:
    return _module("_core.shapes").compatible(a, b)


def shape_debug_str(shape: Any) -> str:
    """TF's ``PartialTensorShape::DebugString`` text (``[2,?]``, ``<unknown>``)."""
    return _module("_core.shapes").debug_str(shape)


def shape_fully_defined(shape: Any) -> bool:
    return _module("_core.shapes").fully_defined(shape)


def set_memory_limit(monkeypatch: Any, nbytes: int) -> None:
    """Pretend the device holds ``nbytes`` (``jta._core.memory.memory_limit``) — ``test_inputs.py``."""
    monkeypatch.setattr(_module("_core.memory"), "memory_limit", lambda: nbytes)


# -- the error channel's primitives --------------------------------------------------------------

def checks_in(jaxpr: Any) -> dict[bool, int]:
    """``{deferred: count}`` of the ``jta_check`` equations of ``jaxpr`` and its sub-jaxprs: a
    value op's run-time check (``deferred=False``), a mutator's deferred report (``True``)."""
    import jax

    check_p = _module("_records.primitives").check_p
    found = {True: 0, False: 0}
    for eqn in jaxpr.eqns:
        if eqn.primitive is check_p:
            found[eqn.params["deferred"]] += 1
        for sub in jax.core.jaxprs_in_params(eqn.params):
            for k, v in checks_in(sub).items():
                found[k] += v
    return found


def functionalize_rules() -> Any:
    """``jta.checkify``'s interpreter's rules, ``{primitive: rule}``."""
    return _module("_delivery.functionalize").RULES
