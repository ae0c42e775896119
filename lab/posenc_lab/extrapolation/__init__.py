"""The length-generalisation experiment, version 2: every encoding trained to competence.

Two experiments, one runner (``python -m posenc_lab.extrapolation``):

- *tasks* (:mod:`.tasks`): copy at a fixed offset, associative recall and
  a prefix copied after a separator (an offset that grows with the
  length), every kind trained for the same fixed number of steps at ``L``
  with a learning rate from a two-point sweep, evaluated at ``L .. 8L``;
- *text* (:mod:`.text`): byte-level language models trained at ``L`` on a
  pinned corpus (:mod:`.corpus`), their loss by position and perplexity at
  ``L .. 16L`` in non-overlapping windows (Press et al.'s Figure 1) and in
  a sliding window.

:mod:`.models` holds what both share (the kinds, RoPE's scaled rows,
training, fine-tuning), :mod:`.runner` the resumable parallel runner and
the records. Version 1 (``posenc_lab.experiments``) was removed with its
record and tests once no chapter read it.
"""
