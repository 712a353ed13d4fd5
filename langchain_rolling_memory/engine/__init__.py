"""The engine: compaction, fact extraction, a turn's reads and recall, shutdown."""
