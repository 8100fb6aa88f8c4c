"""`opgen bench`: cases from `[bench]` specs, timing, tables, JSON and plots.

cases.py (inputs and statements) -> timing.py (torch.utils.benchmark) ->
report.py (ratios, Markdown tables, JSON) -> plot.py; overhead.py times
1-element calls; run.py ties them together for the command.
"""
