"""Fault-injection tests: hostile inputs, crashes, leaks (a package so ``tests/`` is on sys.path)."""
