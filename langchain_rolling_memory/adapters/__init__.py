"""The adapters to LangChain: chat histories, the runnable, the agent middleware, memory tools."""
