"""Pure functions from the spec model to names, types and code strings per language."""
