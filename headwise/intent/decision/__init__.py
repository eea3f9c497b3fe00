"""Deciding on a classifier's scores: the temperature (:mod:`.temperature`), the
out-of-scope threshold (:mod:`.oos`) and detectors beyond the top probability
(:mod:`.ood`). Math on scores and labels, under the classifiers: nothing here imports a
classifier module; choosing all of them for a trained classifier is
:mod:`headwise.intent.posthoc`'s."""
