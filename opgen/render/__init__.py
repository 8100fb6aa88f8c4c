"""Templates to text: the sandboxed Jinja environment, outputs and their keys, formatting, overrides."""
