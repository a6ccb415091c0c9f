"""apimachinery's name and label checks with their exact messages (``validate/content``):
each returns the list of messages, empty when the value is valid."""

from __future__ import annotations

import re

DNS1123_LABEL_FMT = "[a-z0-9]([-a-z0-9]*[a-z0-9])?"
DNS1123_SUBDOMAIN_FMT = DNS1123_LABEL_FMT + "(\\." + DNS1123_LABEL_FMT + ")*"
C_IDENTIFIER_FMT = "[A-Za-z_][A-Za-z0-9_]*"
LABEL_KEY_CHAR_FMT = "[A-Za-z0-9]"
LABEL_KEY_FMT = "(" + LABEL_KEY_CHAR_FMT + "[-A-Za-z0-9_.]" + "*)?" + LABEL_KEY_CHAR_FMT
LABEL_VALUE_FMT = "(" + LABEL_KEY_FMT + ")?"

_LABEL = re.compile("^" + DNS1123_LABEL_FMT + "$")
_SUBDOMAIN = re.compile("^" + DNS1123_SUBDOMAIN_FMT + "$")
_C_ID = re.compile("^" + C_IDENTIFIER_FMT + "$")
_LABEL_KEY = re.compile("^" + LABEL_KEY_FMT + "$")
_LABEL_VALUE = re.compile("^" + LABEL_VALUE_FMT + "$")


def _full(rx: re.Pattern[str], value: str) -> bool:
    # Go's regexp "$" matches only at the end of the text (no trailing-newline allowance).
    return rx.match(value) is not None and not value.endswith("\n")


def regex_error(msg: str, fmt: str, *examples: str) -> str:
    if not examples:
        return f"{msg} (regex used for validation is '{fmt}')"
    out = msg + " (e.g. "
    for i, ex in enumerate(examples):
        if i:
            out += " or "
        out += f"'{ex}', "
    return out + f"regex used for validation is '{fmt}')"


def max_len_error(n: int, dv: bool = False) -> str:
    """util/validation says characters; declarative validation's content package says bytes."""
    return f"must be no more than {n} {'bytes' if dv else 'characters'}"


def blen(value: str) -> int:
    """Go's len(): bytes of the UTF-8 encoding."""
    return len(value.encode("utf-8", "surrogatepass"))


LABEL_MSG = ("a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must "
             "start and end with an alphanumeric character")
SUBDOMAIN_MSG = ("a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', "
                 "and must start and end with an alphanumeric character")
C_ID_MSG = ("a valid C identifier must start with alphabetic character or '_', followed by a string of alphanumeric "
            "characters or '_'")
LABEL_KEY_MSG = "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character"
LABEL_VALUE_MSG = ("a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', "
                   "and must start and end with an alphanumeric character")


def is_dns1123_label(value: str, dv: bool = False) -> list[str]:
    errs = []
    if blen(value) > 63:
        errs.append(max_len_error(63, dv))
    if not _full(_LABEL, value):
        if _full(_SUBDOMAIN, value):
            errs.append("must not contain dots")
        else:
            errs.append(regex_error(LABEL_MSG, DNS1123_LABEL_FMT, "my-name", "123-abc"))
    return errs


def is_dns1123_subdomain(value: str, dv: bool = False) -> list[str]:
    errs = []
    if blen(value) > 253:
        errs.append(max_len_error(253, dv))
    if not _full(_SUBDOMAIN, value):
        errs.append(regex_error(SUBDOMAIN_MSG, DNS1123_SUBDOMAIN_FMT, "example.com"))
    return errs


def is_c_identifier(value: str) -> list[str]:
    if not _full(_C_ID, value):
        return [regex_error(C_ID_MSG, C_IDENTIFIER_FMT, "my_name", "MY_NAME", "MyName")]
    return []


def is_qualified_name(value: str, dv: bool = True) -> list[str]:
    """content.IsLabelKey (util/validation's IsQualifiedName is the same function: bytes)."""
    """IsQualifiedName (= IsLabelKey)."""
    errs: list[str] = []
    parts = value.split("/")
    if len(parts) == 1:
        name = parts[0]
    elif len(parts) == 2:
        prefix, name = parts
        if not prefix:
            errs.append("prefix part must be non-empty")
        else:
            errs.extend("prefix part " + m for m in is_dns1123_subdomain(prefix, True))
    else:
        return ["a valid label key " + regex_error(LABEL_KEY_MSG, LABEL_KEY_FMT, "MyName", "my.name", "123-abc")
                + " with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')"]
    if not name:
        errs.append("name part must be non-empty")
    elif blen(name) > 63:
        errs.append("name part " + max_len_error(63, dv))
    if not _full(_LABEL_KEY, name):
        errs.append("name part " + regex_error(LABEL_KEY_MSG, LABEL_KEY_FMT, "MyName", "my.name", "123-abc"))
    return errs


def is_label_value(value: str, dv: bool = True) -> list[str]:
    errs = []
    if blen(value) > 63:
        errs.append(max_len_error(63, dv))
    if not _full(_LABEL_VALUE, value):
        errs.append(regex_error(LABEL_VALUE_MSG, LABEL_VALUE_FMT, "MyValue", "my_value", "12345"))
    return errs


def mask_trailing_dash(name: str) -> str:
    if len(name) > 1 and name.endswith("-"):
        return name[:-2] + "a"
    return name


def name_is_dns_subdomain(name: str, prefix: bool) -> list[str]:
    return is_dns1123_subdomain(mask_trailing_dash(name) if prefix else name)


def name_is_dns_label(name: str, prefix: bool) -> list[str]:
    return is_dns1123_label(mask_trailing_dash(name) if prefix else name)


_SUBDOMAIN_CASELESS = re.compile("^(?i:" + DNS1123_SUBDOMAIN_FMT + ")$")
SUBDOMAIN_CASELESS_MSG = ("an RFC 1123 subdomain must consist of alphanumeric characters, '-' or '.', and must start "
                          "and end with an alphanumeric character")


def is_dns1123_subdomain_caseless(value: str, dv: bool = False) -> list[str]:
    errs = []
    if blen(value) > 253:
        errs.append(max_len_error(253, dv))
    if not _full(_SUBDOMAIN_CASELESS, value):
        errs.append(regex_error(SUBDOMAIN_CASELESS_MSG, DNS1123_SUBDOMAIN_FMT, "Example.com"))
    return errs
