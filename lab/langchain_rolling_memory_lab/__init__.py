"""The lab: the `rolling-memory` CLI, its rendering and plots, the demo, the replay, the keyless
stand-in models and the conversation readers.

A distribution of its own, ``langchain-rolling-memory-lab`` (this repository's ``lab/`` folder), so
that the library's wheel ships none of it. It is built on the library and may import any of it;
the library never imports the lab (its old path, ``langchain_rolling_memory.lab``, is served by
``langchain_rolling_memory._compat`` for one release).
"""
