"""Deciding on a classifier's scores: the temperature (:mod:`.temperature`), the
out-of-scope threshold (:mod:`.oos`) and detectors beyond the top probability
(:mod:`.ood`), the prior correction towards rare intents (:mod:`.prior`), and choosing all
of them again on held-out data for a saved model (:mod:`.recalibration`)."""
