"""The `opgen` commands, one module each; each module's `register(app)` adds its command.

They are thin: parse the arguments, call the library (imported where the
command runs, so that `opgen --help` stays fast), report. What they share is
in `_support.py`.
"""
