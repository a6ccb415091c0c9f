"""The one line a command says on stderr (a refusal, a warning, where it wrote): every name in it
is shown on that one line, its control characters escaped (``drakit.reports.names``): a file or
folder name, a typed name, a message quoting one can never forge a line of drakit's output."""

from __future__ import annotations

import sys

from drakit.reports.names import clean_name


def say(*parts: object, sep: str = " ") -> None:
    """``print(..., file=sys.stderr)`` of one line whose control characters are escaped."""
    print(clean_name(sep.join(str(p) for p in parts)), file=sys.stderr)
