"""cel-go's strings extension (version 2, the one Kubernetes loads), implemented in Python.

The engine's own strings extension cannot be used: it declares ``indexOf``/``lastIndexOf`` for
strings only, and the engine refuses a second declaration of the same name, which the Kubernetes
lists library needs for ``list.indexOf``. So the string functions are implemented here and
declared in ``_functions`` (``indexOf``/``lastIndexOf`` together with their list forms in
``_lists``). Indices count Unicode code points, as cel-go does.

``format`` follows cel-go's first formatter (strings versions 1 to 3). Its ``%f`` and ``%e``
clauses go through an en_US number printer upstream; they are rendered here with digit grouping
and the ``1.5 × 10⁰³`` notation that printer produces.
"""

from __future__ import annotations

import datetime
import math
from typing import Any, Callable

from ._values import is_quantity, is_semver, type_name

__all__ = [
    "char_at", "index_of", "last_index_of", "lower_ascii", "upper_ascii", "replace", "split",
    "substring", "trim", "join", "quote", "format_string",
]

_GO_SPACE = "\t\n\v\f\r \x85\xa0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009\u200a" \
            "\u2028\u2029\u202f\u205f\u3000"


def _out_of_range(index: int) -> ValueError:
    return ValueError(f"index out of range: {index}")


def char_at(text: str, index: int) -> str:
    if index < 0 or index > len(text):
        raise _out_of_range(index)
    return text[index:index + 1]


def index_of(text: str, sub: str, offset: int = 0) -> int:
    if offset < 0:
        raise _out_of_range(offset)
    if sub == "":
        return min(offset, len(text))
    if offset >= len(text):
        return -1
    return text.find(sub, offset)


def last_index_of(text: str, sub: str, offset: int | None = None) -> int:
    if offset is None:
        if sub == "":
            return len(text)
        if len(text.encode()) < len(sub.encode()):
            return -1
        offset = len(text) - 1
    if offset < 0:
        raise _out_of_range(offset)
    if sub == "":
        return min(offset, len(text))
    if offset >= len(text):
        return -1
    return text.rfind(sub, 0, min(offset, len(text) - len(sub)) + len(sub))


def _map_ascii(text: str, convert: Callable[[str], str]) -> str:
    return "".join(convert(ch) if ch < "\x80" else ch for ch in text)


def lower_ascii(text: str) -> str:
    return _map_ascii(text, str.lower)


def upper_ascii(text: str) -> str:
    return _map_ascii(text, str.upper)


def replace(text: str, old: str, new: str, count: int = -1) -> str:
    if count < 0:
        return _go_replace_all(text, old, new)
    return _go_replace(text, old, new, count)


def _go_replace_all(text: str, old: str, new: str) -> str:
    if old == "":
        return _go_replace(text, old, new, len(text) + 1)
    return text.replace(old, new)


def _go_replace(text: str, old: str, new: str, count: int) -> str:
    if old != "":
        return text.replace(old, new, count)
    # Go inserts the replacement before every code point and at the end.
    pieces: list[str] = []
    for i, ch in enumerate(text):
        pieces.append(new if i < count else "")
        pieces.append(ch)
    pieces.append(new if len(text) < count else "")
    return "".join(pieces)


def split(text: str, sep: str, limit: int = -1) -> list[str]:
    if limit == 0:
        return []
    if sep == "":
        chars = list(text)
        if 0 < limit < len(chars):
            return chars[:limit - 1] + ["".join(chars[limit - 1:])]
        return chars
    return text.split(sep, limit - 1) if limit > 0 else text.split(sep)


def substring(text: str, start: int, end: int | None = None) -> str:
    if end is None:
        if start < 0 or start > len(text):
            raise _out_of_range(start)
        return text[start:]
    if start > end:
        raise ValueError(f"invalid substring range. start: {start}, end: {end}")
    if start < 0 or start > len(text):
        raise _out_of_range(start)
    if end < 0 or end > len(text):
        raise _out_of_range(end)
    return text[start:end]


def trim(text: str) -> str:
    return text.strip(_GO_SPACE)


def join(items: list[Any], sep: str = "") -> str:
    for item in items:
        if type(item) is not str:
            raise ValueError(f"join: invalid input: {_plain(item)}")
    return sep.join(items)


_QUOTE_ESCAPES = {"\a": "\\a", "\b": "\\b", "\f": "\\f", "\n": "\\n", "\r": "\\r", "\t": "\\t",
                  "\v": "\\v", "\\": "\\\\", '"': '\\"'}


def quote(text: str) -> str:
    return '"' + "".join(_QUOTE_ESCAPES.get(ch, ch) for ch in text) + '"'


# -- format (cel-go's first formatter, used by strings versions 1 to 3) ------------------------

_DEFAULT_PRECISION = 6


class _FormatError(ValueError):
    pass


def format_string(template: str, args: list[Any]) -> str:
    out: list[str] = []
    i = arg_index = 0
    while i < len(template):
        ch = template[i]
        if ch != "%":
            out.append(ch)
            i += 1
            continue
        if template[i + 1:i + 2] == "%":
            out.append("%")
            i += 2
            continue
        if arg_index >= len(args):
            raise _FormatError(f"index {arg_index} out of range")
        if i + 1 >= len(template):
            raise _FormatError("unexpected end of string")
        consumed, text = _format_clause(template[i + 1:], args[arg_index])
        out.append(text)
        i += 1 + consumed
        arg_index += 1
    return "".join(out)


def _format_clause(spec: str, arg: Any) -> tuple[int, str]:
    precision, pos = _parse_precision(spec)
    if pos >= len(spec):
        raise _FormatError("could not parse formatting clause: error while parsing precision: "
                           "could not find end of precision specifier")
    verb = spec[pos]
    formatter = _VERBS.get(verb)
    if formatter is None:
        raise _FormatError(f'could not parse formatting clause: unrecognized formatting clause "{verb}"')
    try:
        return pos + 1, formatter(arg, precision)
    except _FormatError as err:
        raise _FormatError(f"error during formatting: {err}") from None


def _parse_precision(spec: str) -> tuple[int | None, int]:
    if not spec.startswith("."):
        return None, 0
    pos = 1
    while pos < len(spec) and spec[pos].isascii() and spec[pos].isdigit():
        pos += 1
    if pos >= len(spec):
        raise _FormatError("could not parse formatting clause: error while parsing precision: "
                           "could not find end of precision specifier")
    digits = spec[1:pos]
    if not digits:
        raise _FormatError("could not parse formatting clause: error while parsing precision: "
                           'error while converting precision to integer: strconv.Atoi: parsing "": invalid syntax')
    return int(digits), pos


def _is_int(value: Any) -> bool:
    return type(value) is int


def _fmt_string(arg: Any, _precision: int | None) -> str:
    if isinstance(arg, list):
        return "[" + ", ".join(_format_member(item) for item in arg) + "]"
    if isinstance(arg, dict):
        return _format_map(arg)
    if arg is None:
        return "null"
    if is_quantity(arg) or is_semver(arg):
        raise _FormatError("string clause can only be used on strings, bools, bytes, ints, doubles, maps, lists, "
                           f"types, durations, and timestamps, was given {type_name(arg)}")
    return cel_string(arg)


def _format_member(item: Any) -> str:
    if type(item) is float:
        text = _fixed(item, _DEFAULT_PRECISION) if math.isfinite(item) else cel_string(item)
        return text if math.isfinite(item) else f'"{text}"'
    if isinstance(item, datetime.datetime):
        return f'timestamp("{cel_string(item)}")'
    if isinstance(item, datetime.timedelta):
        return f'duration("{cel_string(item)}")'
    text = _fmt_string(item, None)
    if type(item) is str:
        return _go_quote(text)
    if isinstance(item, (bytes, bytearray)):
        return "b" + _go_quote(text)
    return text


def _format_map(arg: dict[Any, Any]) -> str:
    pairs = []
    for key, value in arg.items():
        if type(key) not in (str, bool, int):
            raise _FormatError(f"no formatting function for map key of type {type_name(key)}")
        key_text = _go_quote(key) if type(key) is str else cel_string(key)
        pairs.append((key_text, _format_member(value)))
    pairs.sort(key=lambda pair: pair[0])
    return "{" + ", ".join(f"{k}:{v}" for k, v in pairs) + "}"


def _fmt_decimal(arg: Any, _precision: int | None) -> str:
    if not _is_int(arg):
        raise _FormatError(f"decimal clause can only be used on integers, was given {type_name(arg)}")
    return str(arg)


def _float_arg(arg: Any, clause: str) -> float:
    if type(arg) is float:
        return float(arg)
    if type(arg) is str and arg in ("NaN", "Infinity", "-Infinity"):
        return float(arg.replace("Infinity", "inf"))
    raise _FormatError(f"{clause} clause can only be used on doubles, was given {type_name(arg)}")


def _fixed(value: float, precision: int) -> str:
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "∞" if value > 0 else "-∞"
    return f"{value:,.{precision}f}"


def _fmt_fixed(arg: Any, precision: int | None) -> str:
    return _fixed(_float_arg(arg, "fixed-point"), _DEFAULT_PRECISION if precision is None else precision)


_SUPERSCRIPTS = str.maketrans("0123456789-+", "⁰¹²³⁴⁵⁶⁷⁸⁹⁻⁺")


def _fmt_scientific(arg: Any, precision: int | None) -> str:
    value = _float_arg(arg, "scientific")
    if not math.isfinite(value):
        return _fixed(value, 0)
    mantissa, _, exponent = f"{value:.{_DEFAULT_PRECISION if precision is None else precision}e}".partition("e")
    sign = "⁻" if exponent.startswith("-") else ""
    return f"{mantissa}\u202f×\u202f10{sign}{exponent.lstrip('+-').translate(_SUPERSCRIPTS)}"


def _fmt_binary(arg: Any, _precision: int | None) -> str:
    if type(arg) is bool:
        return "1" if arg else "0"
    if not _is_int(arg):
        raise _FormatError(f"only integers and bools can be formatted as binary, was given {type_name(arg)}")
    return format(arg, "b")


def _fmt_octal(arg: Any, _precision: int | None) -> str:
    if not _is_int(arg):
        raise _FormatError(f"octal clause can only be used on integers, was given {type_name(arg)}")
    return format(arg, "o")


def _hex(upper: bool) -> Callable[[Any, int | None], str]:
    def render(arg: Any, _precision: int | None) -> str:
        if type(arg) is str:
            text = arg.encode().hex()
        elif isinstance(arg, (bytes, bytearray)):
            text = bytes(arg).hex()
        elif _is_int(arg):
            text = format(arg, "x")
        else:
            raise _FormatError("only integers, byte buffers, and strings can be formatted as hex, "
                               f"was given {type_name(arg)}")
        return text.upper() if upper else text
    return render


_VERBS: dict[str, Callable[[Any, int | None], str]] = {
    "s": _fmt_string, "d": _fmt_decimal, "f": _fmt_fixed, "e": _fmt_scientific, "b": _fmt_binary,
    "o": _fmt_octal, "x": _hex(False), "X": _hex(True),
}


# -- string conversion as cel-go prints values ------------------------------------------------


def cel_string(value: Any) -> str:
    """``string(value)`` for scalars, as cel-go renders them."""
    if type(value) is bool:
        return "true" if value else "false"
    if type(value) is int or type(value) is str:
        return str(value)
    if type(value) is float:
        return go_float_g(value)
    if isinstance(value, (bytes, bytearray)):
        return bytes(value).decode("utf-8", errors="replace")
    if isinstance(value, datetime.datetime):
        return _rfc3339(value)
    if isinstance(value, datetime.timedelta):
        return _duration_text(value)
    raise _FormatError(f"could not convert argument {_plain(value)} to string")


def go_float_g(value: float) -> str:
    """Go's ``%g`` with the shortest representation (as ``strconv.FormatFloat(v, 'g', -1, 64)``)."""
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    if value == 0:
        return "-0" if math.copysign(1.0, value) < 0 else "0"
    digits, exponent = _shortest_digits(abs(value))
    sign = "-" if value < 0 else ""
    if exponent < -4 or exponent >= 6:
        mantissa = digits[0] + ("." + digits[1:] if len(digits) > 1 else "")
        return f"{sign}{mantissa}e{'-' if exponent < 0 else '+'}{abs(exponent):02d}"
    if exponent < 0:
        return f"{sign}0.{'0' * (-exponent - 1)}{digits}"
    whole = digits[:exponent + 1].ljust(exponent + 1, "0")
    frac = digits[exponent + 1:]
    return f"{sign}{whole}{'.' + frac if frac else ''}"


def _shortest_digits(value: float) -> tuple[str, int]:
    mantissa, _, exp = repr(value).partition("e")
    whole, _, frac = mantissa.partition(".")
    digits = (whole + frac).lstrip("0")
    exponent = int(exp or 0) + len(whole.lstrip("0")) - 1 if whole.strip("0") else \
        int(exp or 0) - (len(frac) - len(frac.lstrip("0"))) - 1
    return digits.rstrip("0") or "0", exponent


def _rfc3339(value: datetime.datetime) -> str:
    utc = value.astimezone(datetime.timezone.utc) if value.tzinfo else value
    text = utc.strftime("%Y-%m-%dT%H:%M:%S")
    if utc.microsecond:
        text += f".{utc.microsecond:06d}".rstrip("0")
    return text + "Z"


def _duration_text(value: datetime.timedelta) -> str:
    micros = (value.days * 86400 + value.seconds) * 1_000_000 + value.microseconds
    seconds, rest = divmod(abs(micros), 1_000_000)
    text = str(seconds) + (f".{rest:06d}".rstrip("0") if rest else "")
    return ("-" if micros < 0 else "") + text + "s"


def _go_quote(text: str) -> str:
    out = ['"']
    for ch in text:
        if ch in _QUOTE_ESCAPES and ch not in "\a\b\f\v":
            out.append(_QUOTE_ESCAPES[ch])
        elif ch in "\a\b\f\v" or (ord(ch) < 0x20) or ch == "\x7f":
            out.append({"\a": "\\a", "\b": "\\b", "\f": "\\f", "\v": "\\v"}.get(ch, f"\\x{ord(ch):02x}"))
        else:
            out.append(ch)
    out.append('"')
    return "".join(out)


def _plain(value: Any) -> str:
    if type(value) is str:
        return value
    try:
        return cel_string(value)
    except _FormatError:
        return repr(value)
