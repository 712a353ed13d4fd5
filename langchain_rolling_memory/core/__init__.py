"""The pure core: records, rules and renderings; no I/O, no clock, no threads."""
