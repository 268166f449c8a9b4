"""Protocol ``extrapolation``: train at length L, evaluate at L..16L under each rescaling.

One cell is a (position scheme, scale) pair, a composed config each; cells that differ only in
the scale share one trained model (``posenc.experiments.cache``, keyed by the training config).
The files, in the order a run uses them:

* ``plan``: which (scheme, scale) cells a request means (``posenc extrapolate``, a sweep job);
* ``scoring``: one rescaled model scored at one length, per-position buckets, fine-tuning at a
  length (the PI / YaRN protocol);
* ``protocol``: a cell, checks before any work, the run of several cells in one folder
  (``extrapolate``, what ``posenc extrapolate`` calls; each length of each cell appended to the
  folder's ``cells.jsonl`` once scored, so that ``--resume`` and a requeued sweep job score only
  the rest) and the sweep protocol ``Extrapolation``;
* ``plots``: ``length.png``, ``per_position.png``, ``depth.png``.
"""
