"""A griffe extension for the API reference: read the package's ``Example:`` sections as examples.

The docstrings are Google style and head their doctests ``Example:``; griffe's Google parser
knows only ``Examples:`` as a section of code, and renders ``Example:`` as an admonition of
Markdown text (where ``['remember']`` reads as a link). The docstrings stay as they are (the
doctests run from them); the reference reads them with the heading griffe expects.
"""

from __future__ import annotations

import re
from typing import Any

import griffe

_HEADING = re.compile(r"^(\s*)Example:$", re.MULTILINE)


class ExampleSections(griffe.Extension):
    """Rename each docstring's ``Example:`` heading to ``Examples:`` as griffe loads it."""

    def on_instance(self, *, obj: griffe.Object, **kwargs: Any) -> None:
        if obj.docstring is not None:
            obj.docstring.value = _HEADING.sub(r"\1Examples:", obj.docstring.value)
