"""Fork-shaped pools: vLLM-API classes written for the oracle's tests, one per shape of
code the oracle meets in the wild, each with one seeded bug (see tests/test_forks.py).

Importable as ``python:forks.<module>:<Class>`` under pytest (tests/ is on sys.path),
or with ``PYTHONPATH=tests`` from the command line.
"""
