"""Run-time helpers that opgen copies into every generated package, as they are here.

A generated package must not need opgen at run time (its wheel depends on torch
only), so these modules import torch and the standard library only, and use
public torch APIs only. They are linted and type-checked with opgen.
"""
