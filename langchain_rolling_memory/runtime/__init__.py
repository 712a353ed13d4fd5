"""Where work runs: background workers and tracing marks; knows no memory concept."""
