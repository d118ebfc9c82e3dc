"""attnexp: training experiments for attention mechanisms."""

__version__ = "0.1.0"
