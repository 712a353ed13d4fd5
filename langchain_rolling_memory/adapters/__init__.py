"""The adapters to LangChain and LangGraph: chat histories, the runnable, the agent middleware,
memory tools, the facts as a LangGraph store, erasure across them.

Wiring only: each calls the engine and the store; it may import every layer but the lab.
"""
