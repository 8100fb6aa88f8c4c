"""opgen: generate PyTorch custom operators from one short spec."""

__version__ = "0.1.0"
