"""The DRA device-selector CEL environment (Kubernetes 1.37 ``StoredExpressions``).

Built on cel-expr-python (Google's cel-cpp). Typical use::

    selector = compile_selector('device.attributes["gpu.example.com"].model == "h100"')
    encoded = encode_device(CelDevice(driver="gpu.example.com", attributes=..., capacity=...))
    selector.matches(encoded)          # True/False, or CelRuntimeError

Compile once per expression (``compile_selector`` caches the last 1024 outcomes) and encode each
device once; an ``EncodedDevice`` is immutable (apart from a per-thread cache of engine inputs)
and can be matched against any number of selectors from any thread, so callers may cache results
per (expression, device). Besides the lazily built engine environment and the compile cache the
package keeps only bounded memo caches of pure functions (parsed quantities, versions, regexes).

What the environment offers
    The variable ``device`` (``driver``, ``attributes``, ``capacity``,
    ``allowMultipleAllocations``), standard CEL with macros, optionals (``.?``, ``[?]``,
    ``optional.of/none/ofNonZeroValue``, ``hasValue``, ``value``, ``orValue``, ``or``, ``optMap``,
    ``optFlatMap``, ``list.first/last``), ``cel.bind``, the Kubernetes quantity and semver
    libraries, the lists library and DRA's ``includes``, the sets extension, the lists extension
    (``slice flatten distinct reverse sort lists.range``), the strings extension (version 2) and
    the regex library (``find``, ``findAll``). Runtime errors carry cel-go's wording (``no such
    key: model``, ``no such overload``, ``actual cost limit exceeded``, ...).

Exact
    Quantity and semver semantics (exact rational arithmetic; equality of both types by value);
    list, set, string and regex functions; error absorption by ``&&``/``||``; missing keys; the
    non-bool result error; the conversion errors of malformed attributes (every evaluation on such
    a device fails, as upstream); ``includes`` and its 48-element cap; the expression length limit;
    the unknown-domain rule for constant domain names (``device.attributes["x.example.com"]`` is
    ``{}`` when the device has no such domain, while ``in``, ``size()`` and iteration see only
    real domains) and for computed domain names (``[k]`` and ``[?k]``); literal validation (regex,
    duration, timestamp) and the bool-or-dyn result type check at compile time; ``got 'types.Int',
    expected iterable type`` for a macro over a scalar taken from the device.

Approximate
    * Cost: cel-expr-python counts no cost, so the limit of 1,000,000 is enforced with an upper
      bound computed from the checked AST and the device's real sizes (see ``_cost``). It charges
      every comprehension iteration and both sides of ``&&``/``||``, so an expression that
      upstream would stop early (``exists`` hitting a match) can be rejected here.
    * The engine also has a fixed budget of about 10,000 comprehension iterations per evaluation;
      when it trips below our cost bound the error says so (``ENGINE_BUDGET_TEXT``).
    * ``device`` is dynamically typed here, while upstream declares its fields. Expressions that
      upstream rejects when type checking (``device.capacity["d"].memory == "80Gi"``,
      ``device.driver + 1``, an unknown ``device`` field) compile here and then evaluate (to
      false, or to a runtime error). Mixed-type list/map literals are rejected only when the
      mixed members are not read from ``device``.
    * Whole-map uses (``in``, ``size()``, iteration) of a ``cel.bind`` alias of
      ``device.attributes``/``device.capacity`` see the pre-filled empty domains of the
      expression's constant lookups.
    * ``isInteger()``/``asInteger()`` answer from the numeric value; upstream answers from its
      internal representation (``quantity("1000m").isInteger()`` is false upstream).
    * Inside Python functions uints arrive as ints: ``[1u, 2u].sum()`` is an int (it still
      compares equal to ``3u``).
    * ``matches``, ``find`` and ``findAll`` run :mod:`conformance.goregex` (Go's regexp on RE2,
      linear time); its notes say what is approximate (Unicode tables' version). A literal
      pattern Go refuses fails ``matches`` at compile time (cel-go's validator) and ``find`` or
      ``findAll`` with ``program instantiation failed: ...`` (upstream compiles it when it makes
      the program; the API server calls that an internal error).
    * ``sum``, ``min``, ``max`` and ``sort`` are declared on ``list(dyn)`` (the engine allows no
      overlapping overloads), so ``["a"].sum()`` is a runtime ``no such overload`` instead of a
      compile error, and their results are typed ``dyn``.
    * ``Selector.static_cost`` (the bound for any device within API limits) is looser than
      upstream's compile-time estimate; it only decides when the per-device bound is needed and
      is no substitute for the API server's "too complex" validation.
    * Error texts of the engine that have no cel-go counterpart are passed through (without the
      status code).

Not supported
    Two-variable comprehensions (``all(i, v, ...)``, ``transformList`` ...) and ordering across
    numeric types in the type checker (``1u < 2``, ``1 < 1.5``; ``dyn(1) < 1.5`` and attribute
    values, which are dynamically typed, work): both raise
    :class:`CelUnsupportedError`, a :class:`CelCompileError`. Parser nesting deeper than 32
    levels (upstream allows more). Results of type duration or timestamp from ``sum``, ``min``,
    ``max`` and the list extension (the engine cannot take them back from Python; a clear runtime
    error says so). A string holding a NUL character as the result of a string function
    (``lowerAscii``, ``substring``, ``join`` ...): the engine would cut it at the NUL, so the
    evaluation is a runtime error saying so (upstream returns the string); attribute values,
    literals and list or map results keep their NULs (see ``_nul``). ``optional.unwrap``/``unwrapOpt``,
    ``sortBy``, the URL, IP, CIDR, format and authz libraries.
"""

from __future__ import annotations

from ..attributes import AttributeValue
from ._compile import (CACHE_SIZE, ENGINE_BUDGET_TEXT, MAX_COST, MAX_EXPRESSION_LENGTH, CelUnsupportedError,
                       Selector, compile_selector, validate_expression)
from ._cost import API_VALUE_BOUND
from ._device import CelDevice, EncodedDevice, encode_device
from ._errors import COST_LIMIT_TEXT, CelCompileError, CelRuntimeError
from ._admission import AdmissionIssue, check_new_expression
from ._derived import evaluate_derived
from ._functions import MAX_INCLUDES_LIST
from ._reads import device_is_plain, read_key

__all__ = [
    "MAX_EXPRESSION_LENGTH", "MAX_COST", "CACHE_SIZE", "MAX_INCLUDES_LIST", "API_VALUE_BOUND",
    "COST_LIMIT_TEXT", "ENGINE_BUDGET_TEXT",
    "CelCompileError", "CelUnsupportedError", "CelRuntimeError",
    "AttributeValue", "CelDevice", "EncodedDevice", "encode_device",
    "Selector", "compile_selector", "validate_expression", "evaluate_derived",
    "AdmissionIssue", "check_new_expression", "device_is_plain", "read_key",
]
