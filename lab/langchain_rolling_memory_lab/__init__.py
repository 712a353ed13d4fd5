"""The lab: the `rolling-memory` CLI, its rendering and plots, the demo, the replay, the keyless
stand-in models and the conversation readers.

It is built on the library and may import any of it; the library never imports the lab.
"""
