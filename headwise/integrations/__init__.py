"""Integrations of headwise with other systems, each an optional extra imported on use.

* :mod:`headwise.integrations.ray` — Ray Data: :class:`~headwise.integrations.ray.IntentPredictor`
  for ``Dataset.map_batches``, and :func:`~headwise.integrations.ray.predict_files`, what
  ``headwise predict MODEL --data DIR --out DIR --ray`` runs (``pip install headwise[ray]``);
* :mod:`headwise.integrations.ray_serve` — the intent service as a Ray Serve deployment
  (``headwise serve MODEL --ray``).

This package sits at the top of the layers, beside :mod:`headwise.commands`: it may use
everything below (the predictors included), and nothing below imports it. Importing it
imports no optional library; each module imports its own when used.
"""
