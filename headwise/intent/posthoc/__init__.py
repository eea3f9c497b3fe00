"""Post-hoc operations on a trained classifier, on held-out labelled data: the prior
correction folded into its bias (:mod:`.prior`, logit adjustment), and its temperature,
out-of-scope threshold and detector chosen on validation rows or again for a saved model
(:mod:`.recalibration`). They read and change classifiers; the math they choose with (the
temperature, the thresholds, the detectors) is :mod:`headwise.intent.decision`'s, which
imports no classifier."""
