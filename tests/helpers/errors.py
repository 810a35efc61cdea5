"""``expect_error``: the one way the tests expect a mode-K error from a program."""

from __future__ import annotations

from typing import Any

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
        jta.throw(run(mode, lambda *a: pytree(build(*a)), *args))
