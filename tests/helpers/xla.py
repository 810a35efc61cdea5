"""XLA:CPU options for the test suite.

Most of the suite's time is XLA:CPU compiling small programs. :data:`FAST_FLAGS` make it compile
them about 1.5x faster: the legacy fusion emitters, no LLVM optimisation passes. They change how
the machine code is emitted, not what it computes, nor XLA's HLO passes; but the emitters name
and split fusions differently, so a test that inspects optimized HLO compiles with
:data:`DEFAULT_OPTIONS` (XLA's own defaults), as users' programs are compiled.
"""

from __future__ import annotations

import os

FAST_FLAGS = "--xla_cpu_use_fusion_emitters=false --xla_backend_optimization_level=0 " \
    "--xla_llvm_disable_expensive_passes=true"
DEFAULT_OPTIONS = {"xla_cpu_use_fusion_emitters": True, "xla_backend_optimization_level": 2,
                   "xla_llvm_disable_expensive_passes": False}


def use_fast_flags() -> None:
    """Prepend :data:`FAST_FLAGS` to ``XLA_FLAGS`` (``JTA_TEST_XLA_FLAGS`` replaces them, e.g.
    with ``""`` to test with XLA's defaults); before JAX starts its CPU backend."""
    flags = os.environ.get("JTA_TEST_XLA_FLAGS", FAST_FLAGS)
    os.environ["XLA_FLAGS"] = f"{flags} {os.environ.get('XLA_FLAGS', '')}".strip()


def optimized_hlo(lowered) -> str:
    """The optimized HLO of ``lowered`` (a ``jax.jit(f).lower(...)``), compiled as XLA would by default."""
    return lowered.compile(compiler_options=DEFAULT_OPTIONS).as_text()
