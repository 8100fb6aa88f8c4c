"""Spec files: load (with line numbers), model, validate."""
