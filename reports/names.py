"""Names on a console: a file, a folder, a case id, anything a user or a file named, shown on one
line whatever it holds (issue 32: a case file named ``a\\nPASSED x [reference].case.yaml``
printed a forged line into drakit's output).

:func:`clean_name` is the one escaping of every user-controlled name the console prints: each
control character (line breaks and tabs included), DEL, C1 controls, the Unicode line and
paragraph separators and the bidi overrides become ``\\xNN`` / ``\\uNNNN``; a lone surrogate (a
file name's undecodable byte) becomes U+FFFD. Free text that may span lines (a failure's
detail) is :func:`drakit.reports.clean_text`'s, which keeps line breaks and tabs.
``conformance.errors`` (the pure core, which may not import this package) holds the same rule
for its own messages; a test keeps the two equal.

:func:`shell_word` quotes a name for a command line the user may paste (a case's ``rerun``): a
name with control characters is quoted as bash's ``$'...'``, with the same escapes, so the
command is one line and still names the file.
"""

from __future__ import annotations

import re
import shlex

NAME_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069\ud800-\udfff]")


def _escape(code: int) -> str:
    return f"\\x{code:02x}" if code <= 0xFF else f"\\u{code:04x}"


def clean_name(text: object) -> str:
    """*text* on one line, every control character visible as an escape (see the module)."""
    return NAME_CONTROL.sub(lambda m: "\ufffd" if 0xD800 <= ord(m.group()) <= 0xDFFF else _escape(ord(m.group())),
                            str(text))


def shell_word(text: str) -> str:
    """*text* as one shell word: ``shlex.quote`` when it has no control character, else bash's
    ``$'...'`` quoting (a surrogate-escaped byte as that byte)."""
    if not NAME_CONTROL.search(text):
        return shlex.quote(text)

    def one(m: re.Match[str]) -> str:
        code = ord(m.group())
        return f"\\x{code - 0xDC00:02x}" if 0xDC80 <= code <= 0xDCFF else _escape(code)

    body = text.replace("\\", "\\\\").replace("'", "\\'")
    return "$'" + NAME_CONTROL.sub(one, body) + "'"
