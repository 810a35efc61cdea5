"""Benchmarks of jta against native JAX loops and TensorFlow: ``python -m benchmarks``.

* :mod:`benchmarks.workloads` - the workloads (W1-W5, unbatched W1u-W3u, the compile-time RNN) written
  once per implementation;
* :mod:`benchmarks.timing` - interleaved, warmed-up, median-of-repeats timing (and compile timing);
* :mod:`benchmarks.report` - the table, the PASS/FAIL targets, the JSON file and the plot;
* :mod:`benchmarks.compile_split` - where a gradient's compile time goes (trace, ``jta.checkify``'s
  interpreter, lowering, XLA) for native, ``checks=False``, ``jax.jit(jta.checkify(f))`` and
  ``jta.checked`` (``python -m benchmarks.compile_split --compare``).
"""
