"""Where work runs: background workers drained at exit, calls in a thread, tracing marks.

Knows no memory concept (it takes callables): it imports only `errors` and itself
(tests/test_layout.py checks this).
"""
