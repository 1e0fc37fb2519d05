"""kvpool: a formally checked reference KV-cache block pool, and a conformance oracle."""

__version__ = "0.1.0"
