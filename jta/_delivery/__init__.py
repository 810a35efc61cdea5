"""Delivery: how a record reaches the user, above the core that computes it.

* ``value_ops``: read, gather and concat, the one path by which a value leaves an array, each
  reporting the record that made it; eagerly, a record raises at once.
* ``callbacks``: a bare ``jax.jit``'s checks, lowered to host callbacks, and what they raised.
* ``functionalize``: ``jta.checkify``'s interpreter, one rule per primitive that holds a jaxpr.
* ``hoisting``: a scan's bookkeeping taken out of its body and decided after the loop.
* ``known``: values known while tracing (indices, fresh arrays' flags and records): a loop's
  decision made in NumPy then, so that nothing is staged.
* ``jax_rules``: every change jta makes to JAX's rules (eager loops, conditionals and
  ``shard_map`` holding checks; checks in vmapped ``cond``/``while``; the callbacks' log).
* ``api``: ``jta.checkify``, ``jta.checked``, ``jta.throw``, ``jta.ErrorRecord``.
"""
