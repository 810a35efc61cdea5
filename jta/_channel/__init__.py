"""The error channel: how an error that depends on traced values reaches the user.

* ``catalogue``: every error jta raises (TensorFlow's class and text), with a fixed code.
* ``records``: the record format (``[code, v1, v2, v3]``) and the per-slot bits, as data.
* ``primitives``: ``jta_record`` (a record's update) and ``jta_check`` (a report).
* ``slots``: ``jta_slot`` (one op's bits of one slot, and the error they show), and their replay.
* ``delivery``: the value ops (read, gather, concat: the one path by which a value leaves an
  array, reporting its record) and when a record is reported (eagerly: raised at once).
* ``functionalize``: ``jta.checkify``'s interpreter, one rule per primitive that holds a jaxpr.
* ``hoisting``: a scan's bookkeeping taken out of its body and decided after the loop.
* ``jax_rules``: every change jta makes to JAX's rules: eager loops, conditionals and
  ``shard_map`` holding checks raise jta's exceptions; checks in vmapped ``cond``/``while`` count
  only for the members that run them; debug callbacks' log records of jta's errors dropped.
* ``api``: ``jta.checkify``, ``jta.checked``, ``jta.throw``, ``jta.ErrorRecord``.
"""
