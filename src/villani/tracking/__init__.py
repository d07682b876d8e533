"""What DVC tracks across versions, computed from the results: the ``metrics`` stage.

:mod:`.metrics` writes ``results/metrics/{dataset}.json`` (flat headline numbers, the
claims' verdicts as codes) and :mod:`.dvc_plots` the data of DVC's plots
(``results/plots/{dataset}/*.csv``) and their ``plots:`` entries in ``dvc.yaml``. Sits
above ``claims`` (it reads their verdicts) and below ``dag``.
"""
