"""Streaming batch prediction, one concept a module; :mod:`headwise.intent.batch_predict`
re-exports the public names and documents the whole."""
