"""The record format: what an error is, as data, below the core that computes it.

* ``catalogue``: every error jta raises (TensorFlow's class and text), with a fixed code.
* ``records``: the record (``[code, v1, v2, v3]``) and the per-slot flags.
* ``primitives``: ``jta_record`` (a record's update: the first error wins) and ``jta_check`` (a
  report), with the rules every record follows.
* ``slots``: ``jta_slot`` (one op's flags of one slot, and the error they show), and their replay.
"""
