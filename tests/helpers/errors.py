"""``expect_error``: the one way the tests expect a mode-K error from a program."""

from __future__ import annotations

import dataclasses
from typing import Any

import jax
import pytest

import jta

from .drivers import pytree
from .modes import run


def expect_error(mode: str, build: Any, cls: type[BaseException], pattern: str, *args: Any) -> None:
    """``build(*args)``, run in ``mode`` (see :func:`tests.helpers.modes.run`), fails with
    ``cls`` and a message matching ``pattern`` (usually ``k_text(text, NAMES[api])``): at
    call/trace time, or (errors recorded inside jit/scan) when ``jta.throw`` sees the result.

    ``build`` returns what the program produced: arrays (``jta.TensorArray``, a
    :class:`~tests.helpers.drivers.RawTA`, raw-op states) or any tuple/list/dict of them and
    values. A handle program ``program(b, *args)`` for a driver ``b`` is passed as
    ``with_backend(api, program)``."""
    with pytest.raises(cls, match=pattern):
        jta.throw(run_reporting(mode, lambda *a: pytree(build(*a)), *args))


def run_reporting(mode: str, fn: Any, *args: Any) -> Any:
    """:func:`run`, where a value op's check that raised in compiled code (``JaxRuntimeError``
    from its host callback, under a bare ``jit``) is re-raised as jta's exception."""
    _forget_raised()
    try:
        return jax.block_until_ready(run(mode, fn, *args))
    except jax.errors.JaxRuntimeError:
        jta.throw()
        raise


def _forget_raised() -> None:
    """``jta.throw()`` keeps what a compiled check raised until it is asked: an earlier test's
    (raised under ``pytest.raises(JaxRuntimeError)``) must not be taken for this one's."""
    try:
        jta.throw()
    except (jta.errors.TensorArrayError, ValueError):
        pass


@dataclasses.dataclass
class Refused(Exception):
    """A phase of a generated program that raised (the program generators' tests classify it)."""
    phase: str
    error: BaseException


def run_phase(phase: str, fn: Any) -> None:
    """``fn()``; any exception but a failed assertion (a compiled check's re-raised by ``jta.throw``)
    becomes :class:`Refused`."""
    _forget_raised()
    try:
        try:
            fn()
        except jax.errors.JaxRuntimeError:
            jta.throw()
            raise
    except AssertionError:
        raise
    except Exception as error:  # noqa: BLE001 - classified by the caller
        raise Refused(phase, error) from error
