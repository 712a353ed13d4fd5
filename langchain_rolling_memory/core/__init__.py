"""The pure core: the records, and the rules that decide what memory holds and shows.

Owns what is stored (records), where to cut, what a compaction folds and what a turn shows,
the fact rules, prompts and cleaning, framing and quoting, lexical search and recall excerpts.
Does no I/O, reads no clock (the caller passes "now") and starts no thread: it imports only
`errors`, itself, pure standard modules, langchain-core's types and pydantic
(tests/test_layout.py checks this).
"""
