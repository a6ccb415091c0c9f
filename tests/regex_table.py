"""Regular expressions and what Go's regexp (the 1.37.2 API server's CEL) does with them: the
table ``tests/test_goregex.py`` checks on the reference backend and
``tests/clusters/test_regex_api_server.py`` on the real API server (issue 32).

The texts below are Go's own (``regexp.Compile`` and ``FindString``/``FindAllString`` of Go
1.26, the toolchain the local control plane is built with), taken once from a Go program and
checked on the API server by the cluster test."""

from __future__ import annotations

#: patterns the API server accepts
VALID = [
    r"^gpu-[0-9]+$", r"(?i)NVIDIA", r"\d{1,3}", r"(?P<n>a)", r"(?<n>a)", r"\pL+", r"\p{Greek}+", r"[[:alpha:]]+",
    r"\Qa.b\E", r"a{1000}", r"a\z", r"(?s)a.b", r"\pl+", r"\p{Letter}+", r"(a+)+$", r"a*", r"\B", r"x*?",
    r"(?m)^b$", r"\x{263a}", r"[^\x00-\x7F]+", r"(?U)a+", r"\bgpu\b",
    "(?:" + "a" * 3300 + "){1000}",  # 3.3 million instructions: within Go's limit
]

#: patterns the API server refuses, with Go's error
REFUSED = {
    r"(a)\1": "invalid escape sequence: `\\1`",                                 # backreference
    r"a(?=b)": "invalid or unsupported Perl syntax: `(?=`",                     # lookahead
    r"a(?!b)": "invalid or unsupported Perl syntax: `(?!`",
    r"(?<=a)b": "invalid named capture: `(?<=a)b`",                              # lookbehind
    r"(?<!a)b": "invalid named capture: `(?<!a)b`",
    r"a++": "invalid nested repetition operator: `++`",                         # possessive
    r"(?>a)": "invalid or unsupported Perl syntax: `(?>`",                      # atomic group
    r"a\Z": "invalid escape sequence: `\\Z`",
    r"a{1001}": "invalid repeat count: `{1001}`",
    r"a{2}{2}": "invalid nested repetition operator: `{2}{2}`",
    r"x{99999999999}": "invalid repeat count: `{99999999999}`",
    r"\C": "invalid escape sequence: `\\C`",
    r"\k<n>": "invalid escape sequence: `\\k`",
    r"(?P=n)": "invalid or unsupported Perl syntax: `(?P`",
    r"(?#note)": "invalid or unsupported Perl syntax: `(?#`",
    r"(?x)a b": "invalid or unsupported Perl syntax: `(?x`",
    r"[z-a]": "invalid character class range: `z-a`",
    r"(a": "missing closing ): `(a`",
    r"a)": "unexpected ): `a)`",
    r"[a": "missing closing ]: `[a`",
    "a\\": "trailing backslash at end of expression: ``",
    r"*a": "missing argument to repetition operator: `*`",
    r"\p{Nag_Mundari}": "invalid character class range: `\\p{Nag_Mundari}`",
    r"\p{Old_Italic}": "invalid character class range: `\\p{Old_Italic}`",
    r"\x{110000}": "invalid escape sequence: `\\x{110000`",
    r"(?P<名>a)": "invalid named capture: `(?P<名>`",
    r"a**": "invalid nested repetition operator: `**`",
    r"\8": "invalid escape sequence: `\\8`",
    r"\e": "invalid escape sequence: `\\e`",
    r"[[:foo:]]": "invalid character class range: `[:foo:]`",
    r"(?P<n>a)(?P<n": "invalid named capture: `(?P<n`",
    "(" * 1001 + ")" * 1001: "expression nests too deeply: `" + "(" * 1001 + ")" * 1001 + "`",
    "(?:" + "a" * 3400 + "){1000}": "expression too large: `(?:" + "a" * 3400 + "){1000}`",
}

#: (pattern, text, MatchString, FindString, FindAllString(-1)) as Go gives them
MATCHES = [
    ('^gpu-[0-9]+$', 'gpu-12', True, 'gpu-12', ['gpu-12']),
    ('^gpu-[0-9]+$', 'NVIDIA nvidia', False, '', []),
    ('(?i)NVIDIA', 'NVIDIA nvidia', True, 'NVIDIA', ['NVIDIA', 'nvidia']),
    ('(?i)NVIDIA', 'gpu-12', False, '', []),
    ('\\d{1,3}', 'gpu-12', True, '12', ['12']),
    ('\\d{1,3}', 'a1b22c333', True, '1', ['1', '22', '333']),
    ('\\d{1,3}', 'NVIDIA nvidia', False, '', []),
    ('(?P<n>a)', 'NVIDIA nvidia', True, 'a', ['a']),
    ('(?P<n>a)', 'a1b22c333', True, 'a', ['a']),
    ('(?P<n>a)', 'gpu-12', False, '', []),
    ('(?<n>a)', 'NVIDIA nvidia', True, 'a', ['a']),
    ('(?<n>a)', 'a1b22c333', True, 'a', ['a']),
    ('(?<n>a)', 'gpu-12', False, '', []),
    ('\\pL+', 'gpu-12', True, 'gpu', ['gpu']),
    ('\\pL+', 'NVIDIA nvidia', True, 'NVIDIA', ['NVIDIA', 'nvidia']),
    ('\\pL+', '', False, '', []),
    ('\\p{Greek}+', 'Αβγ abc', True, 'Αβγ', ['Αβγ']),
    ('\\p{Greek}+', 'gpu-12', False, '', []),
    ('[[:alpha:]]+', 'gpu-12', True, 'gpu', ['gpu']),
    ('[[:alpha:]]+', 'NVIDIA nvidia', True, 'NVIDIA', ['NVIDIA', 'nvidia']),
    ('[[:alpha:]]+', '', False, '', []),
    ('\\Qa.b\\E', 'xa.by', True, 'a.b', ['a.b']),
    ('\\Qa.b\\E', 'gpu-12', False, '', []),
    ('a{1000}', 'gpu-12', False, '', []),
    ('a\\z', 'NVIDIA nvidia', True, 'a', ['a']),
    ('a\\z', 'aaa', True, 'a', ['a']),
    ('a\\z', 'gpu-12', False, '', []),
    ('(?s)a.b', 'a1b22c333', True, 'a1b', ['a1b']),
    ('(?s)a.b', 'xa.by', True, 'a.b', ['a.b']),
    ('(?s)a.b', 'gpu-12', False, '', []),
    ('\\pl+', 'gpu-12', True, 'gpu', ['gpu']),
    ('\\pl+', 'NVIDIA nvidia', True, 'NVIDIA', ['NVIDIA', 'nvidia']),
    ('\\pl+', '', False, '', []),
    ('\\p{Letter}+', 'gpu-12', True, 'gpu', ['gpu']),
    ('\\p{Letter}+', 'NVIDIA nvidia', True, 'NVIDIA', ['NVIDIA', 'nvidia']),
    ('\\p{Letter}+', '', False, '', []),
    ('(a+)+$', 'NVIDIA nvidia', True, 'a', ['a']),
    ('(a+)+$', 'aaa', True, 'aaa', ['aaa']),
    ('(a+)+$', 'gpu-12', False, '', []),
    ('a*', 'gpu-12', True, '', ['', '', '', '', '', '', '']),
    ('a*', 'NVIDIA nvidia', True, '', ['', '', '', '', '', '', '', '', '', '', '', '', 'a']),
    ('\\B', 'gpu-12', True, '', ['', '', '']),
    ('\\B', 'NVIDIA nvidia', True, '', ['', '', '', '', '', '', '', '', '', '']),
    ('\\B', 'a\nb', False, '', []),
    ('x*?', 'gpu-12', True, '', ['', '', '', '', '', '', '']),
    ('x*?', 'NVIDIA nvidia', True, '', ['', '', '', '', '', '', '', '', '', '', '', '', '', '']),
    ('(?m)^b$', 'a\nb', True, 'b', ['b']),
    ('(?m)^b$', 'gpu-12', False, '', []),
    ('\\x{263a}', '☺ smile', True, '☺', ['☺']),
    ('\\x{263a}', '1a☺1', True, '☺', ['☺']),
    ('\\x{263a}', 'gpu-12', False, '', []),
    ('[^\\x00-\\x7F]+', 'Αβγ abc', True, 'Αβγ', ['Αβγ']),
    ('[^\\x00-\\x7F]+', '☺ smile', True, '☺', ['☺']),
    ('[^\\x00-\\x7F]+', 'gpu-12', False, '', []),
    ('(?U)a+', 'NVIDIA nvidia', True, 'a', ['a']),
    ('(?U)a+', 'a1b22c333', True, 'a', ['a']),
    ('(?U)a+', 'gpu-12', False, '', []),
    ('\\bgpu\\b', 'gpu-12', True, 'gpu', ['gpu']),
    ('\\bgpu\\b', 'gpu gpux', True, 'gpu', ['gpu']),
    ('\\bgpu\\b', 'NVIDIA nvidia', False, '', []),
]


def cel_string(text: str) -> str:
    """``text`` as a CEL string literal."""
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'").replace("\n", "\\n") + "'"


def expressions(pattern: str) -> dict[str, str]:
    """Selector expressions using ``pattern`` as a literal: ``matches`` (checked when compiled)
    and ``find`` (checked when the program is made)."""
    p = cel_string(pattern)
    return {"matches": f"'x'.matches({p})", "find": f"device.driver.find({p}) == ''"}
