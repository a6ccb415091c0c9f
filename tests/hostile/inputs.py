"""The bad-input corpus: each row one input, the exit code a user gets, and the one line.

``CASE_FILES`` are case files (``drakit lint FILE``, and all together beside a valid case in one
``drakit run``); ``COMMANDS`` are whole command lines over other inputs (results files, vendor
profiles, kubeconfigs, checkpoints, options). In ``line`` (a regular expression searched in the
command's output), ``{file}`` stands for the input's path and ``{dir}`` for the corpus folder.
The gRPC requests to the fake driver are in ``tests/node/test_hostile_grpc.py``.
"""

from __future__ import annotations

import json
import os
import socket
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Union

Content = Union[str, bytes, Callable[[Path], None]]

VALID = """\
id: hostile/valid
title: the valid case beside the bad ones
features: [core]
hardware:
  nodes:
    - {name: node-a, shape: small-1gpu}
steps:
  - apply:
      apiVersion: resource.k8s.io/v1
      kind: ResourceClaim
      metadata: {name: c}
      spec: {devices: {requests: [{name: gpu, exactly: {deviceClassName: "${class.gpu}"}}]}}
  - expect:
      - notAllocated: {claim: c}
"""

# a case that would load, with markers to replace
BASE = """\
id: hostile/NAME
title: a bad input
features: [core]
steps:
  - apply:
      apiVersion: resource.k8s.io/v1
      kind: ResourceClaim
      metadata: {name: c}
      spec: {devices: {requests: [{name: gpu, exactly: {deviceClassName: "CLASS"}}]}}
  - expect:
      - object: {kind: ResourceClaim, name: c, match: MATCH}
"""


def base(name: str, *, cls: str = "${class.gpu}", match: str = "{}", extra: str = "") -> str:
    return BASE.replace("NAME", name).replace("CLASS", cls).replace("MATCH", match) + extra


def bomb(levels: int = 9, anchor_first: str = "a") -> str:
    """The billion-laughs document: nine levels of nine aliases each."""
    lines = [f'{anchor_first}0: &{anchor_first}0 ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]']
    for i in range(1, levels + 1):
        refs = ", ".join([f"*{anchor_first}{i - 1}"] * 9)
        lines.append(f"{anchor_first}{i}: &{anchor_first}{i} [{refs}]")
    return "\n".join(lines) + "\n"


def _big(size: int) -> Callable[[Path], None]:
    def write(path: Path) -> None:
        line = "# " + "x" * 1021 + "\n"  # 1 KiB a line
        with open(path, "w", encoding="utf-8") as f:
            f.write(VALID.replace("hostile/valid", "hostile/big"))
            for _ in range(size // 1024):
                f.write(line)
    return write


def _many_errors(path: Path) -> None:
    path.write_text("".join(f"---\nid: bad/{i}\n" for i in range(5000)), encoding="utf-8")


def _with_allocatable(amount: str) -> str:
    return base("allocatable") + f"hardware:\n  nodes:\n    - name: n1\n      shape: small-1gpu\n      allocatable: {{cpu: {amount}}}\n"


#: A pod using claim ``c``: an item of a step's ``apply`` list.
POD_USING_C = """\
      - apiVersion: v1
        kind: Pod
        metadata: {name: p}
        spec:
          resourceClaims: [{name: c, resourceClaimName: c}]
          containers: [{name: m, image: x, resources: {claims: [{name: c}]}}]
"""

POD = """\
id: hostile/NAME
title: a pod with a bad amount
features: [core]
steps:
  - apply:
      apiVersion: v1
      kind: Pod
      metadata: {name: p}
      spec:
        containers:
          - {name: main, image: registry.k8s.io/pause:3.10, resources: RESOURCES}
SPEC
"""


def _pod(name: str, resources: str, spec: str = "") -> str:
    """A case applying one pod whose container has *resources* (flow YAML); *spec*: more lines of the pod's spec."""
    return POD.replace("NAME", name).replace("RESOURCES", resources).replace("SPEC\n", spec)


_C = r"{file}:11: steps\[0\]\.apply\.spec\.containers\[0\]\.resources"
POD_AMOUNTS = (  # (name, container resources, more pod spec, the line) - the API server's words (admission oracle)
    ("cpu-negative", "{requests: {cpu: -5}}", "", _C + r'\.requests\.cpu: Invalid value: "-5": must be greater than or equal to 0$'),
    ("cpu-negative-milli", '{requests: {cpu: "-100m"}}', "", _C + r'\.requests\.cpu: Invalid value: "-100m": must be greater than'),
    ("memory-limit-negative", "{limits: {memory: -1Gi}}", "",
     _C + r'\.limits\.memory: Invalid value: "-1Gi": must be greater than or equal to 0 \(and 1 more\)$'),
    ("gpu-negative", '{requests: {example.com/gpu: "-1"}, limits: {example.com/gpu: "-1"}}', "",
     _C + r'\.limits\.example\.com/gpu: Invalid value: "-1": must be greater than or equal to 0 \(and 1 more\)$'),
    ("gpu-fraction", '{requests: {example.com/gpu: 500m}, limits: {example.com/gpu: 500m}}', "",
     _C + r"\.requests\.example\.com/gpu: Invalid value: '500m': must be an integer$"),
    ("cpu-over-limit", "{requests: {cpu: 2}, limits: {cpu: 1}}", "",
     _C + r'\.requests: Invalid value: "2": must be less than or equal to cpu limit of 1$'),
    ("cpu-words", '{requests: {cpu: "four cores"}}', "",
     _C + r"\.requests\.cpu: invalid quantity 'four cores': quantities must match the regular expression"),
    ("pod-level-negative", "{}", "        resources: {requests: {cpu: -1}}\n",
     r'{file}:12: steps\[0\]\.apply\.spec\.resources\.requests\.cpu: Invalid value: "-1": must be greater than or equal to 0$'),
    ("overhead-negative", "{}", "        overhead: {memory: -1}\n",
     r'{file}:\d+: steps\[0\]\.apply\.spec\.overhead.*Invalid value: "-1": must be greater than or equal to 0$'),
)


NOT_A_QUANTITY = r"'{}' is not a quantity: quantities must match the regular expression"
ALLOCATABLE = (  # (name, YAML of the amount, the message after the field)
    ("huge-exponent", '"1e1000000"', r"'1e1000000' is not a quantity: quantity exponent 1000000 is larger than this kit supports \(1000\)"),
    ("nan", '"NaN"', NOT_A_QUANTITY.format("NaN")),
    ("inf", '"Inf"', NOT_A_QUANTITY.format("Inf")),
    ("infinity-yaml", ".inf", r"inf is not of type 'string', 'integer'"),
    ("negative", '"-5"', r"'-5' is negative: a node cannot have less than nothing"),
    ("negative-int", "-5", r"'-5' is negative"),
    ("over-int64", '"10E"', r"'10E' is over the limit of 9,223,372,036,854,775 \(2\^63-1 milli-units\)"),
    ("5000-digits", '"' + "9" * 5000 + '"', r"'9{60}\.\.\. \(4,940 more characters\)' is not a quantity: 5,000 characters$"),
    ("empty", '""', r"'' is not a quantity"),
    ("words", '"four cores"', NOT_A_QUANTITY.format("four cores")),
)
DURATIONS = (  # (field, name, the step, the message after the field)
    ("advance", "huge", "advance: 999999999999999999999999h", r"999999999999999999999999h is over the limit of 24h for one step"),
    ("advance", "just-over", "advance: 86401s", r"86401s is over the limit of 24h for one step"),
    ("advance", "many-ms", "advance: 86400001ms", r"86400001ms is over the limit of 24h for one step"),
    ("advance", "25h", "advance: 25h", r"25h is over the limit of 24h for one step"),
    ("advance", "5000-digits", "advance: " + "9" * 5000 + "s", r"9{60}\.\.\. \(4,941 more characters\) is over the limit"),
    ("within", "huge", "expect: [{notAllocated: {claim: c}}]\n    within: 99999999999999s", r"99999999999999s is over the limit"),
)


@dataclass(frozen=True)
class CaseFile:
    name: str  # the file is <name>.case.yaml
    content: Content
    line: str  # regex; {file} is the file's path
    code: int = 2  # drakit lint's exit code
    errors: int | None = 1  # problems lint reports for the file (None: lint reports no count)
    in_run: bool = True  # False: not part of the shared run (none since issue 25: every file the finder sees is)
    with_valid: bool = False  # linted together with the valid case (a problem of two files)


def _fifo(path: Path) -> None:
    os.mkfifo(path)


def _loop(path: Path) -> None:
    path.symlink_to(path.name)  # a link to itself


def _socket(path: Path) -> None:
    with socket.socket(socket.AF_UNIX) as s:  # the socket file stays after the close
        s.bind(str(path))


def _link_to(target: str) -> Callable[[Path], None]:
    return lambda path: path.symlink_to(target)


def _link_to_fifo(path: Path) -> None:
    fifo = path.parent.parent / "a-fifo-elsewhere"
    os.mkfifo(fifo)
    path.symlink_to(fifo)


Y = r"{file}:(\d+): "  # any line

CASE_FILES: tuple[CaseFile, ...] = (
    # -- limits ----------------------------------------------------------------------------------
    CaseFile("alias-bomb", "id: hostile/bomb\n" + bomb(),
             r"{file}:7: YAML: aliases expand to more than 100,000 nodes \(the limit; an alias bomb\?\)"),
    CaseFile("alias-bomb-in-match", base("bomb-in-match", match="*a9", extra="").replace("id:", bomb() + "id:", 1),
             r"{file}:\d+: YAML: aliases expand to more than 100,000 nodes"),
    CaseFile("alias-bomb-in-merge-keys", "a: &a {x: 1, y: 2}\n" + "".join(
        f"b{i}: &b{i} {{<<: [{', '.join(['*a' if i == 0 else f'*b{i - 1}'] * 9)}]}}\n" for i in range(12)),
        r"{file}:\d+: YAML: aliases expand to more than 100,000 nodes"),
    CaseFile("recursive-alias", "id: &x [*x]\n", r"{file}:1: YAML: alias \*x refers to a node that contains it"),
    CaseFile("deep-flow-20000", "id: " + "[" * 20000 + "]" * 20000 + "\n",
             r"{file}:1: YAML: nested deeper than 100 levels \(the limit\)"),
    CaseFile("deep-block-150", "".join("  " * i + "k:\n" for i in range(150)) + "  " * 150 + "v\n",
             r"{file}:100: YAML: nested deeper than 100 levels \(the limit\)"),
    CaseFile("deep-inside-match", base("deep-match", match="[" * 120 + "]" * 120),
             r"{file}:11: YAML: nested deeper than 100 levels \(the limit\)"),
    CaseFile("deep-through-alias", "a: &a " + "[" * 60 + "1" + "]" * 60 + "\nb: " + "[" * 60 + "*a" + "]" * 60 + "\n",
             r"{file}:2: YAML: nested deeper than 100 levels \(the limit\)"),
    CaseFile("size-51MB", _big(51 << 20),
             r"{file}:1: the file is 51\.0 MiB, over the case-file size limit of 1 MiB \(--max-case-size raises it\); not loaded"),
    CaseFile("size-1MiB-and-a-bit", _big((1 << 20) + 2048),
             r"{file}:1: the file is 1\.0 MiB, over the case-file size limit of 1 MiB"),
    CaseFile("errors-5000", _many_errors, r"{file}:100: stopped after 49 problems: the 451\+ documents from this line on were not loaded", errors=50),
    CaseFile("documents-2000", lambda p: p.write_text("---\n".join(  # cluster-only: loaded, not run by the shared run
        VALID.replace("hostile/valid", f"hostile/v{i}").replace("features: [core]\n", "features: [core]\nbackends: [cluster]\n")
        for i in range(2000))),
             r"{file}:8001: more than 500 documents in one file \(the limit\): this one and those after it were not "
             r"loaded; split the file"),
    # -- not regular files: each one a load error of lint and of the run (issue 25: the run
    # passed over them in silence and said PASS) ---------------------------------------------
    CaseFile("a-fifo", _fifo, r"{file}: not a regular file \(a FIFO\); not loaded"),
    CaseFile("a-socket", _socket, r"{file}: not a regular file \(a socket\); not loaded"),
    CaseFile("a-link-to-dev-zero", _link_to("/dev/zero"),
             r"{file}: not a regular file \(a character device through a symlink\); not loaded"),
    CaseFile("a-link-to-dev-null", _link_to("/dev/null"),
             r"{file}: not a regular file \(a character device through a symlink\); not loaded"),
    CaseFile("a-dangling-link", _link_to("nowhere.case.yaml"),
             r"{file}: a dangling symlink \(to 'nowhere\.case\.yaml'\): not a regular file; not loaded"),
    CaseFile("a-link-to-itself", _loop, r"{file}: a symlink loop \(to 'a-link-to-itself\.case\.yaml'\): not a regular file"),
    CaseFile("a-link-to-a-fifo", _link_to_fifo, r"{file}: not a regular file \(a FIFO through a symlink\); not loaded"),
    # -- YAML ------------------------------------------------------------------------------------
    CaseFile("empty", "", r"{file}:1: no case in this file \(it is empty\)"),
    CaseFile("only-comments", "# a case will go here\n\n# later\n",
             r"{file}:1: no case in this file \(it holds only comments or blank documents\)"),
    CaseFile("only-separators", "---\n---\n", r"{file}:1: no case in this file \(it holds only comments or blank documents\)"),
    CaseFile("explicit-null-document", "--- null\n", r"{file}:1: a case document must be a mapping"),
    CaseFile("a-list", "- id: x\n- title: y\n", r"{file}:1: a case document must be a mapping"),
    CaseFile("a-scalar", "just words\n", r"{file}:1: a case document must be a mapping"),
    CaseFile("unclosed-flow", "id: x\ntitle: [unclosed\nfeatures: [core]\n",
             r"{file}:3: YAML: while parsing a flow sequence"),
    CaseFile("tab-indent", "id: x\nsteps:\n\t- advance: 1s\n", r"{file}:3: YAML: while scanning for the next token found character that cannot start any token"),
    CaseFile("bad-utf8", b"id: x\ntitle: \xff\xfe\n", r"{file}: not UTF-8 text: invalid start byte at byte 13; not loaded"),
    CaseFile("nul-byte", "id: x\ntitle: a\x00b\n", r"{file}:2: YAML: unacceptable character #x0000"),
    CaseFile("duplicate-key", base("dupkey").replace("title: a bad input", "title: a\ntitle: b"),
             r"{file}:3: YAML: duplicate key 'title'"),
    CaseFile("duplicate-anchor", "a: &x 1\nb: &x 2\n", r"{file}:2: YAML: found duplicate anchor 'x' \(first at line 1\)"),
    CaseFile("undefined-alias", "id: *nowhere\n", r"{file}:1: YAML: found undefined alias 'nowhere'"),
    CaseFile("unknown-tag", "id: !include other.yaml\n", r"{file}:1: YAML: could not determine a constructor for the tag '!include'"),
    CaseFile("python-tag", "id: !!python/object/apply:os.system [echo hi]\n",
             r"{file}:1: YAML: could not determine a constructor for the tag 'tag:yaml.org,2002:python/object/apply:os.system'"),
    CaseFile("set-tag", "id: !!set {a, b}\n", r"{file}:1: YAML: unsupported YAML tag !!set"),
    CaseFile("binary-tag", "id: !!binary aGVsbG8=\n", r"{file}:1: YAML: unsupported YAML tag !!binary"),
    CaseFile("huge-integer", "id: x\ncount: " + "9" * 5000 + "\n", r"{file}:2: YAML: integer of 5,000 characters: too long to read"),
    CaseFile("complex-key", "? [a, b]\n: 1\n", r"{file}:1: YAML: unsupported mapping key \['a', 'b'\]"),
    CaseFile("null-key", "~: 1\n", r"{file}:1: YAML: unsupported mapping key None"),
    # -- schema ----------------------------------------------------------------------------------
    CaseFile("missing-id", base("x").replace("id: hostile/x\n", ""), r"{file}:1: <root>: 'id' is a required property"),
    CaseFile("bad-id", base("x").replace("hostile/x", "Hostile/Has Spaces"), r"{file}:1: id: 'Hostile/Has Spaces' does not match"),
    CaseFile("long-id", base("x").replace("hostile/x", "a" * 121), r"{file}:1: id: must have at most 120 characters, got 121"),
    CaseFile("too-many-nodes", base("nodes") + "hardware:\n  nodes:\n" + "".join(
        f"    - {{name: n{i}, shape: server-8gpu}}\n" for i in range(2000)),
        r"{file}:13: hardware\.nodes: must have at most 100 items, got 2,000$"),
    CaseFile("too-many-steps", base("steps") + "".join("  - advance: 1s\n" for _ in range(5000)),
             r"{file}:4: steps: must have at most 1000 items, got 5,002$"),
    CaseFile("unknown-top-field", base("unknown-field") + "colour: blue\n", r"{file}:12: colour: unknown field \(allowed: "),
    CaseFile("unknown-step-field", base("step-field").replace("  - apply:", "  - aply:"),
             r"{file}:5: steps\[0\]\.aply: unknown field"),
    CaseFile("features-not-a-list", base("features").replace("features: [core]", "features: core"),
             r"{file}:3: features: 'core' is not of type 'array'"),
    CaseFile("no-steps", base("nosteps").split("steps:")[0], r"{file}:1: <root>: 'steps' is a required property"),
    CaseFile("bad-duration", base("duration") + "  - advance: 5 parsecs\n", r"{file}:12: steps\[2\]\.advance: '5 parsecs' does not match"),
    CaseFile("unknown-assertion", base("assertion").replace("- object: {kind: ResourceClaim, name: c, match: {}}",
                                                             "- podIsHappy: {pod: p}"),
             r"{file}:\d+: steps\[1\]\.expect\[0\]"),
    # every schema problem of a document at once (issue 25: one a round, five took three rounds)
    CaseFile("six-schema-problems", "id: hostile/six\ntitle: [not, a, string]\nfeatures: core\nprofile: sometimes\n"
             "backends: mainframe\nsteps:\n  - advance: soon\n  - aply: {}\n",
             r"{file}:5: backends: 'mainframe' is not of type 'array'", errors=6),
    CaseFile("bad-profile", base("profile") + "profile: sometimes\n", r"{file}:12: profile: 'sometimes' is not one of \['required', 'optional'\]"),
    CaseFile("bad-backend", base("backend") + "backends: [mainframe]\n", r"{file}:12: backends\[0\]: 'mainframe' is not one of"),
    CaseFile("title-a-map", base("title").replace("title: a bad input", "title: {a: 1}"), r"{file}:2: title: \{'a': 1\} is not of type 'string'"),
    CaseFile("huge-string-in-schema-error", base("hugestr").replace("title: a bad input", "title: [" + "x" * 100_000 + "]"),
             r"{file}:2: title: \['x{150,250}\.\.\. \([\d,]+ characters left out\) \.\.\.x{150,250}'\] is not of type 'string'$"),
    # -- corpus ----------------------------------------------------------------------------------
    CaseFile("duplicate-id-in-file", VALID.replace("hostile/valid", "hostile/twice") + "---\n"
             + VALID.replace("hostile/valid", "hostile/twice"),
             r"{file}:1 and {file}:16: id 'hostile/twice' defined twice"),
    CaseFile("duplicate-id-across-files", VALID,
             r"{dir}/a-valid\.case\.yaml:1 and {file}:1: id 'hostile/valid' defined twice", with_valid=True),
    CaseFile("unknown-feature", base("feature").replace("[core]", "[core, teleportation]"),
             r"{file}:3: features\[1\]: unknown feature 'teleportation'; known: core, "),
    CaseFile("unknown-gate", base("gate") + "featureGates: {DRAEverything: true}\n",
             r"{file}:12: featureGates\.DRAEverything: unknown feature gate 'DRAEverything'"),
    CaseFile("unknown-scheduler-gate", base("schedgate") + "schedulerFeatureGates: {DRAEverything: false}\n",
             r"{file}:12: schedulerFeatureGates\.DRAEverything: unknown feature gate 'DRAEverything'"),
    CaseFile("unknown-shape", base("shape") + "hardware:\n  nodes:\n    - {name: node-a, shape: server-9gpu}\n",
             r"{file}:14: hardware\.nodes\[0\]\.shape: unknown shape 'server-9gpu' \(bundled: "),
    CaseFile("shape-file-missing", base("shapefile") + "hardware:\n  nodes:\n    - {name: node-a, shape: ./nowhere.yaml}\n",
             r"{file}:14: hardware\.nodes\[0\]\.shape: nowhere\.yaml: cannot read shape file"),
    CaseFile("duplicate-node", base("nodes") + "hardware:\n  nodes:\n    - {name: n1, shape: small-1gpu}\n"
             "    - {name: n1, shape: small-1gpu}\n", r"{file}:13: hardware\.nodes: node names must be unique"),
    # -- quantities and durations, bounded where they are read (issue 25: each was an internal
    # error, "this is a drakit bug", or a silent pass) ------------------------------------------
    *(CaseFile(f"allocatable-{name}", _with_allocatable(amount), rf"{{file}}:16: hardware\.nodes\[0\]\.allocatable\.cpu: {line}")
      for name, amount, line in ALLOCATABLE),
    *(CaseFile(f"pod-{name}", _pod(name, res, spec), line) for name, res, spec, line in POD_AMOUNTS),
    CaseFile("capacity-request-words", base("capwords").replace(
        'exactly: {deviceClassName: "${class.gpu}"}', 'exactly: {deviceClassName: "${class.gpu}", capacity: {requests: {memory: lots}}}'),
        r"{file}:9: steps\[0\]\.apply\.spec\.devices\.requests\[0\]\.exactly\.capacity\.requests\.memory: "
        r"invalid quantity 'lots': quantities must match the regular expression"),
    *(CaseFile(f"{field}-{name}", base(f"{field}-{name}") + f"  - {step}\n",
               rf"{{file}}:{12 + step.count(chr(10))}: steps\[2\]\.{field}: {line}")
      for field, name, step, line in DURATIONS),
    # -- placeholders ----------------------------------------------------------------------------
    CaseFile("unknown-role", base("role", cls="${class.quantum}"),
             r"{file}:9: steps\[0\]\.apply\.spec\.devices\.requests\[0\]\.exactly\.deviceClassName: unknown placeholder \$\{class\.quantum\} \(not in the vendor profile: no class for role 'quantum'; roles: anygpu, gpu, "),
    CaseFile("unknown-placeholder-kind", base("placeholder", cls="${colour.gpu}"),
             r"{file}:9: .*unknown placeholder \$\{colour\.gpu\} \(not in the vendor profile: kinds are attr, cel, class, driver, "),
    CaseFile("placeholder-in-key", base("keyph", match='{metadata: {labels: {"${nope.x}": y}}}'),
             r"{file}:11: .*unknown placeholder \$\{nope\.x\}"),
    # -- manifests and CEL -----------------------------------------------------------------------
    CaseFile("cel-syntax", base("cel").replace('exactly: {deviceClassName: "${class.gpu}"}',
                                               'exactly: {deviceClassName: "${class.gpu}", selectors: [{cel: {expression: "device.driver =="}}]}'),
             r"{file}:9: steps\[0\]\.apply\.spec\.devices\.requests\[0\]\.exactly\.selectors\[0\]\.cel\.expression: compilation failed"),
    CaseFile("attribute-name-300KB", "id: hostile/longattr\ntitle: a 300 KB attribute name\nfeatures: [core]\nsteps:\n"
             "  - apply:\n      apiVersion: resource.k8s.io/v1\n      kind: ResourceSlice\n      metadata: {name: s}\n"
             "      spec:\n        driver: x.drakit.example\n        nodeName: n1\n"
             "        pool: {name: n1, generation: 1, resourceSliceCount: 1}\n        devices:\n          - name: d\n"
             "            attributes:\n              ? " + "a" * 300_000 + "\n              : {string: x}\n",
             # one bounded line that still says why (issue 25: echoed as one 300,161-character line)
             r"{file}:16: steps\[0\]\.apply\.spec\.devices\[0\]\.attributes\.a{300,400}\.\.\.: name 'a{100,}\.\.\. "
             r"\(299,\d+ characters left out\) \.\.\.a{100,}' must be a C identifier of at most 32 characters$"),
    CaseFile("cel-nul-outside-a-literal", base("celnul").replace('exactly: {deviceClassName: "${class.gpu}"}',
                                                                'exactly: {deviceClassName: "${class.gpu}", selectors: [{cel: {expression: "'
                                                                "device.driver == 'a\\0b' \\0|| true"'"}}]}'),
             r"{file}:9: .*selectors\[0\]\.cel\.expression: compilation failed: ERROR: <input>:1:\d+: Syntax error: "
             r"token recognition error at: '\\x00'$"),
    CaseFile("cel-not-bool", base("celtype").replace('exactly: {deviceClassName: "${class.gpu}"}',
                                                    'exactly: {deviceClassName: "${class.gpu}", selectors: [{cel: {expression: "1 + 1"}}]}'),
             r"{file}:9: .*selectors\[0\]\.cel\.expression: .*bool"),
    CaseFile("cel-too-long", base("cellong").replace('exactly: {deviceClassName: "${class.gpu}"}',
                                                    'exactly: {deviceClassName: "${class.gpu}", selectors: [{cel: {expression: "'
                                                    + " || ".join(["true"] * 3000) + '"}}]}'),
             r"{file}:9: .*selectors\[0\]\.cel\.expression: "),
    CaseFile("request-name", base("reqname").replace("name: gpu,", "name: GPU_0,"),
             r"{file}:9: steps\[0\]\.apply\.spec\.devices\.requests\[0\]\.name: must be a DNS label"),
    CaseFile("count-too-big", base("count").replace('exactly: {deviceClassName: "${class.gpu}"}',
                                                   'exactly: {deviceClassName: "${class.gpu}", count: -1}'),
             r"{file}:9: .*exactly\.count: must be greater than zero"),
    CaseFile("unknown-kind", base("kind").replace("kind: ResourceClaim\n      metadata", "kind: Spaceship\n      metadata"),
             r"{file}:7: steps\[0\]\.apply\.kind: unsupported object Spaceship"),
    CaseFile("manifest-without-name", base("noname").replace("metadata: {name: c}", "metadata: {}"),
             r"{file}:8: steps\[0\]\.apply\.metadata"),
    CaseFile("manifest-a-string", base("mstring").replace(
        "      apiVersion: resource.k8s.io/v1\n      kind: ResourceClaim\n      metadata: {name: c}\n"
        "      spec: {devices: {requests: [{name: gpu, exactly: {deviceClassName: \"${class.gpu}\"}}]}}\n",
        "      just a string\n"), r"{file}:5: steps\[0\]\.apply: "),
)


# -- other inputs: whole command lines ---------------------------------------------------------

@dataclass(frozen=True)
class Command:
    name: str
    files: dict[str, Content]  # written into <dir>/<name>/ before the batch runs
    argv: tuple[str, ...]  # {d} is that folder; {valid} the valid case file
    line: str  # regex searched in stdout + stderr; {d} is that folder
    code: int


def _results(**changes: object) -> str:
    """A small valid results.json with *changes* applied at the top level."""
    doc = json.loads(VALID_RESULTS)
    doc.update(changes)
    return json.dumps(doc)


def _checkpoint(claims: object, *, checksum: int | None = None) -> str:
    canonical = json.dumps(claims, sort_keys=True, separators=(",", ":")).encode()
    return json.dumps({"kind": "DrakitPluginCheckpoint", "version": 1,
                       "checksum": zlib.crc32(canonical) if checksum is None else checksum, "claims": claims})


def _agent_checkpoint(data: str, *, checksum: int | None = None) -> str:
    return json.dumps({"Data": data, "Checksum": zlib.crc32(data.encode()) if checksum is None else checksum})


def _results_with(number: str) -> Callable[[Path], None]:
    """A valid results file whose first case's line is *number* (JSON text)."""
    def write(path: Path) -> None:
        doc = json.loads(VALID_RESULTS)
        doc["cases"][0]["line"] = "@NUMBER@"
        path.write_text(json.dumps(doc).replace('"@NUMBER@"', number))
    return write


def _sparse(size: int) -> Callable[[Path], None]:
    def write(path: Path) -> None:
        with open(path, "wb") as f:
            f.truncate(size)  # a hole: no disk used
    return write


RESULTS_NUMBERS = (  # (name, JSON number, the message after the path)
    ("5001-digits", "9" * 5001, r"an integer of 5,001 digits: not a drakit results file"),
    ("41-digits", "9" * 41, r"an integer of 41 digits: not a drakit results file"),
    ("1e999", "1e999", r"a number too large \(1e999\): not a drakit results file"),
    ("NaN", "NaN", r"NaN \(not JSON\): not a drakit results file"),
    ("Infinity", "-Infinity", r"-Infinity \(not JSON\): not a drakit results file"),
)


KUBECONFIG_OK = """\
apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://127.0.0.1:1"}}]
users: [{name: u, user: {token: not-a-secret}}]
contexts: [{name: x, context: {cluster: c, user: u}}]
current-context: x
"""

UPSTREAM_PROFILE = (Path(__file__).parents[2] / "examples" / "upstream-test-driver.yaml").read_text(encoding="utf-8")
VALID_RESULTS = (Path(__file__).parents[1] / "fixtures" / "results" / "all-passed.json").read_text(encoding="utf-8")
FIRST_ID = json.loads(VALID_RESULTS)["cases"][0]["id"]
FIRST_BACKEND = json.loads(VALID_RESULTS)["cases"][0]["backend"]

SERVE = ("driver", "serve", "--driver", "gpu.acme.example.com", "--node", "n1", "--plugin-dir", "{d}/p",
         "--registry-dir", "{d}/r", "--cdi-dir", "{d}/c")
SERVE_CLAIMS = SERVE + ("--claims", "{d}/claims.json")
CP = "p/gpu.acme.example.com/checkpoint.json"
AGENT = ("node-agent", "--registry-dir", "{d}/r", "--node", "n1", "--state-dir", "{d}/s", "--driver-wait", "0")
AGENT_CP = "s/dra_manager_state"
KUBECONFIG_RUN = ("run", "{valid}", "--backend", "cluster", "--out", "{d}/out", "--kubeconfig", "{d}/kubeconfig")
VENDOR_LINT = ("lint", "{valid}", "--vendor", "{d}/vendor.yaml")
VENDOR_OK = """\
apiVersion: drakit.dev/v1
kind: VendorProfile
"""

COMMANDS: tuple[Command, ...] = (
    # -- results files for drakit report ------------------------------------------------------
    Command("report-empty", {"r.json": ""}, ("report", "{d}/r.json"), r"drakit: {d}/r\.json:1:1: not valid JSON: Expecting value", 2),
    Command("report-truncated", {"r.json": lambda p: p.write_text(VALID_RESULTS[:300])}, ("report", "{d}/r.json"),
            r"drakit: {d}/r\.json:\d+:\d+: not valid JSON: ", 2),
    Command("report-deep", {"r.json": "[" * 100_000}, ("report", "{d}/r.json"),
            r"drakit: {d}/r\.json: nested deeper than 100 levels: not a drakit results file", 2),
    Command("report-deep-object", {"r.json": '{"a":' * 200 + "1" + "}" * 200}, ("report", "{d}/r.json"),
            r"drakit: {d}/r\.json: nested deeper than 100 levels", 2),
    Command("report-a-list", {"r.json": "[]"}, ("report", "{d}/r.json"), r"drakit: {d}/r\.json: \$: expected a JSON object, found list", 2),
    Command("report-other-json", {"r.json": '{"a": 1}'}, ("report", "{d}/r.json"),
            r"drakit: {d}/r\.json: \$\.schemaVersion: unsupported schema version None", 2),
    Command("report-binary", {"r.json": b"\xff\xfe\x00"}, ("report", "{d}/r.json"), r"drakit: {d}/r\.json: not UTF-8 text", 2),
    Command("report-bad-status", {"r.json": lambda p: p.write_text(_results(cases=[{**json.loads(VALID_RESULTS)["cases"][0], "status": "weird"}]))},
            ("report", "{d}/r.json"), r"drakit: {d}/r\.json: \$\.cases\[0\]\.status: 'weird' is not one of", 2),
    Command("report-no-verdict", {"r.json": lambda p: p.write_text(json.dumps({k: v for k, v in json.loads(VALID_RESULTS).items() if k != "verdict"}))},
            ("report", "{d}/r.json"), r"drakit: {d}/r\.json: \$: 'verdict' is a required property", 2),
    Command("report-case-twice", {"r.json": lambda p: p.write_text(_results(cases=json.loads(VALID_RESULTS)["cases"] * 2))},
            ("report", "{d}/r.json"), rf"drakit: {{d}}/r\.json: \$\.cases\[\d+\]: case '{FIRST_ID}' on backend '{FIRST_BACKEND}' appears twice", 2),
    Command("report-a-folder", {"r.json/x": ""}, ("report", "{d}/r.json"), r"drakit: {d}/r\.json: not a regular file \(a folder\)$", 2),
    Command("report-missing", {}, ("report", "{d}/nothing.json"), r"drakit: {d}/nothing\.json: cannot read: No such file or directory", 2),
    Command("report-merge-deep", {"r.json": lambda p: p.write_text(VALID_RESULTS), "m.json": "[" * 100_000},
            ("report", "{d}/r.json", "--merge", "{d}/m.json"), r"drakit: --merge {d}/m\.json: nested deeper than 100 levels: not a drakit results file", 2),
    Command("report-merge-not-cases", {"r.json": lambda p: p.write_text(VALID_RESULTS), "m.json": "[1, 2]"},
            ("report", "{d}/r.json", "--merge", "{d}/m.json"), r"drakit: --merge {d}/m\.json: cases: \$\[\d\]: \d is not of type 'object'", 2),
    Command("report-merge-half-case", {"r.json": lambda p: p.write_text(VALID_RESULTS), "m.json": '[{"id": "x", "backend": "node-plugin"}]'},
            ("report", "{d}/r.json", "--merge", "{d}/m.json"), r"drakit: --merge {d}/m\.json: cases: \$\[0\]: '\w+' is a required property", 2),
    Command("report-compare-deep", {"r.json": lambda p: p.write_text(VALID_RESULTS), "old.json": "[" * 5000},
            ("report", "--compare", "{d}/old.json", "{d}/r.json"), r"drakit: {d}/old\.json: nested deeper than 100 levels", 2),
    # -- results files bounded before they are parsed (issue 25: a 5,001-digit integer was an
    # internal error; a 141 MB file was read for minutes) ----------------------------------------
    *(Command(f"report-{name}", {"r.json": _results_with(text)}, ("report", "{d}/r.json"), rf"drakit: {{d}}/r\.json: {line}", 2)
      for name, text, line in RESULTS_NUMBERS),
    *(Command(f"report-compare-{name}", {"r.json": lambda p: p.write_text(VALID_RESULTS), "new.json": _results_with(text)},
              ("report", "--compare", "{d}/r.json", "{d}/new.json"), rf"drakit: {{d}}/new\.json: {line}", 2)
      for name, text, line in RESULTS_NUMBERS),
    Command("report-merge-5001-digits", {"r.json": lambda p: p.write_text(VALID_RESULTS), "m.json": "[" + "9" * 5001 + "]"},
            ("report", "{d}/r.json", "--merge", "{d}/m.json"),
            r"drakit: --merge {d}/m\.json: an integer of 5,001 digits: not a drakit results file", 2),
    Command("report-65MiB-sparse", {"r.json": _sparse(65 << 20)}, ("report", "{d}/r.json"),
            r"drakit: {d}/r\.json: the file is 65 MiB, over the results-file size limit of 64 MiB "
            r"\(DRAKIT_MAX_RESULTS_SIZE=BYTES raises it\)", 2),
    Command("report-compare-65MiB-sparse", {"r.json": lambda p: p.write_text(VALID_RESULTS), "old.json": _sparse(65 << 20)},
            ("report", "--compare", "{d}/old.json", "{d}/r.json"), r"drakit: {d}/old\.json: the file is 65 MiB, over the results-file size limit", 2),
    # -- vendor profiles ----------------------------------------------------------------------
    Command("vendor-missing", {}, ("lint", "{valid}", "--vendor", "{d}/nowhere.yaml"), r"nowhere\.yaml", 2),
    Command("vendor-empty", {"vendor.yaml": ""}, VENDOR_LINT, r"{d}/vendor\.yaml", 2),
    Command("vendor-bad-yaml", {"vendor.yaml": "name: [unclosed\n"}, VENDOR_LINT, r"{d}/vendor\.yaml:2: invalid YAML: while parsing a flow sequence", 2),
    Command("vendor-alias-bomb", {"vendor.yaml": bomb()}, VENDOR_LINT,
            r"{d}/vendor\.yaml:6: invalid YAML: aliases expand to more than 100,000 nodes", 2),
    Command("vendor-deep", {"vendor.yaml": "a: " + "[" * 5000 + "]" * 5000 + "\n"}, VENDOR_LINT,
            r"{d}/vendor\.yaml:1: invalid YAML: nested deeper than 100 levels", 2),
    Command("vendor-a-list", {"vendor.yaml": "- a\n- b\n"}, VENDOR_LINT, r"{d}/vendor\.yaml:1: ", 2),
    Command("vendor-unknown-field", {"vendor.yaml": "name: acme\nflavour: mint\n"}, VENDOR_LINT, r"{d}/vendor\.yaml:\d+: ", 2),
    Command("vendor-unknown-plugin-placeholder", {"vendor.yaml": UPSTREAM_PROFILE.replace('"{node}"', '"{nosuch}"')},
            VENDOR_LINT, r"{d}/vendor\.yaml:\d+: driverUnderTest\.plugin\.command\[\d+\]: unknown placeholder \{nosuch\} "
                         r"in '\{nosuch\}' \(known: \{node\}, ", 2),
    Command("vendor-plugin-lone-brace", {"vendor.yaml": UPSTREAM_PROFILE.replace('"{node}"', '"{node"')},
            VENDOR_LINT, r"{d}/vendor\.yaml:\d+: driverUnderTest\.plugin\.command\[\d+\]: expected '\}' before end of "
                         r"string in '\{node' \(write \{\{ and \}\} for literal braces\)", 2),
    Command("vendor-unknown-folder-placeholder", {"vendor.yaml": UPSTREAM_PROFILE.replace('["{pluginsDir}/', '["{tmp}/')},
            VENDOR_LINT, r"{d}/vendor\.yaml:\d+: driverUnderTest\.plugin\.folders\[0\]: unknown placeholder \{tmp\}", 2),
    # -- kubeconfigs (drakit run --backend cluster) -------------------------------------------
    Command("kubeconfig-missing", {}, KUBECONFIG_RUN, r"{d}/kubeconfig", 2),
    Command("kubeconfig-empty", {"kubeconfig": ""}, KUBECONFIG_RUN, r"{d}/kubeconfig", 2),
    Command("kubeconfig-not-yaml", {"kubeconfig": "apiVersion: [v1\n"}, KUBECONFIG_RUN, r"{d}/kubeconfig", 2),
    Command("kubeconfig-alias-bomb", {"kubeconfig": bomb()}, KUBECONFIG_RUN, r"{d}/kubeconfig", 2),
    Command("kubeconfig-no-context", {"kubeconfig": "apiVersion: v1\nkind: Config\nclusters: []\ncontexts: []\nusers: []\n"},
            KUBECONFIG_RUN, r"{d}/kubeconfig", 2),
    Command("kubeconfig-unknown-context", {"kubeconfig": KUBECONFIG_OK}, KUBECONFIG_RUN + ("--context", "nope"), r"nope", 2),
    Command("kubeconfig-unreachable", {"kubeconfig": KUBECONFIG_OK}, KUBECONFIG_RUN,
            r"drakit: cluster backend: cannot reach the API server of context 'x' \(kubeconfig {d}/kubeconfig\)", 2),
    # beside the reference backend, an unusable kubeconfig errors the cluster cases only (issue 25:
    # a garbage one aborted the reference part too)
    *(Command(f"kubeconfig-{name}-beside-reference", {"kubeconfig": text},
              ("run", "{valid}", "--backend", "reference,cluster", "--out", "{d}/out", "--kubeconfig", "{d}/kubeconfig"),
              r"(?s)ERROR hostile/valid \[cluster\]: harness: the cluster backend is not available: HarnessError: "
              r"kubeconfig {d}/kubeconfig.*\n2 cases: 1 passed, 0 failed, 1 error", 1)
      for name, text in (("garbage", "garbage: [\n"), ("empty", ""), ("alias-bomb", bomb()),
                         ("no-context", "apiVersion: v1\nkind: Config\nclusters: []\ncontexts: []\nusers: []\n"))),
    Command("kubeconfig-without-cluster-backend", {"kubeconfig": KUBECONFIG_OK},
            ("run", "{valid}", "--out", "{d}/out", "--kubeconfig", "{d}/kubeconfig"),
            r"drakit run: --kubeconfig only applies to the cluster backend, and --backend is 'reference': "
            r"add --backend cluster", 2),
    Command("cluster-local-without-cluster-backend", {}, ("run", "{valid}", "--out", "{d}/out", "--cluster", "local"),
            r"drakit run: --cluster only applies to the cluster backend", 2),
    # -- checkpoints ----------------------------------------------------------------------------
    Command("checkpoint-garbage", {CP: "garbage", "claims.json": "[]"}, SERVE_CLAIMS,
            r"drakit driver serve: {d}/p/gpu\.acme\.example\.com/checkpoint\.json: unreadable checkpoint: .*; not started: "
            r"the driver will not guess which claims it prepared", 1),
    Command("checkpoint-checksum", {CP: _checkpoint({}, checksum=1), "claims.json": "[]"}, SERVE_CLAIMS,
            r"{d}/p/gpu\.acme\.example\.com/checkpoint\.json: checksum mismatch \(file corrupted\); not started", 1),
    Command("checkpoint-truncated", {CP: _checkpoint({"uid-1": {"namespace": "ns", "name": "c", "devices": []}})[:40],
                                     "claims.json": "[]"}, SERVE_CLAIMS, r"checkpoint\.json: unreadable checkpoint: .*; not started", 1),
    Command("checkpoint-wrong-kind", {CP: json.dumps({"kind": "Other", "version": 7}), "claims.json": "[]"}, SERVE_CLAIMS,
            r"checkpoint\.json: not a version 1, 2 or 3 plugin checkpoint; not started", 1),
    Command("checkpoint-bad-entries", {CP: _checkpoint({"uid-1": 5}), "claims.json": "[]"}, SERVE_CLAIMS,
            r"checkpoint\.json: unreadable checkpoint: .*; not started", 1),
    Command("agent-checkpoint-garbage", {AGENT_CP: "{{{", "claims.json": "[]"}, AGENT + ("--prepare", "{d}/claims.json"),
            r"drakit node-agent: {d}/s/dra_manager_state: not JSON: .*; not started", 1),
    Command("agent-checkpoint-checksum", {AGENT_CP: _agent_checkpoint("{}", checksum=7), "claims.json": "[]"},
            AGENT + ("--prepare", "{d}/claims.json"), r"dra_manager_state: checksum mismatch \(file corrupted\); not started", 1),
    Command("agent-checkpoint-entries", {AGENT_CP: _agent_checkpoint(json.dumps({"kind": "DRACheckpoint",
             "apiVersion": "checkpoint.dra.kubelet.k8s.io/v1", "Entries": [{"ClaimUID": "u"}]})), "claims.json": "[]"},
            AGENT + ("--prepare", "{d}/claims.json"), r"dra_manager_state: unreadable entries: KeyError: .*; not started", 1),
    # -- missing config and bad claims files -------------------------------------------------------
    Command("serve-no-claims-source", {}, SERVE, r"drakit driver serve: no claims to read: not in a pod and no usable "
            r"kubeconfig .*; give --claims FILE, --kubeconfig PATH or --in-cluster", 2),
    Command("serve-claims-missing", {}, SERVE + ("--claims", "{d}/nowhere"),
            r"drakit driver serve: --claims {d}/nowhere: no such claims file or folder", 2),
    Command("serve-unknown-shape", {"claims.json": "[]"}, SERVE_CLAIMS + ("--hardware", "server-9gpu"),
            r"drakit driver serve: unknown shape 'server-9gpu'", 2),
    Command("serve-bad-kubeconfig", {"kubeconfig": "kind: [\n"}, SERVE + ("--kubeconfig", "{d}/kubeconfig"),
            r"drakit driver serve: cannot load kubeconfig {d}/kubeconfig", 2),
    Command("agent-claims-bomb", {"claims.yaml": bomb()}, AGENT + ("--prepare", "{d}/claims.yaml"),
            r"drakit node-agent: {d}/claims\.yaml: not valid JSON/YAML: line 6: aliases expand to more than 100,000 nodes", 2),
    Command("agent-claims-deep-json", {"claims.json": "[" * 100_000}, AGENT + ("--prepare", "{d}/claims.json"),
            r"drakit node-agent: {d}/claims\.json: nested deeper than 100 levels: not a claims file", 2),
    Command("agent-claims-binary", {"claims.yaml": b"\xff\xfe"}, AGENT + ("--prepare", "{d}/claims.yaml"),
            r"drakit node-agent: {d}/claims\.yaml: not UTF-8 text", 2),
    Command("serve-shape-file-deep", {"shape.yaml": "[" * 5000, "claims.json": "[]"},
            SERVE_CLAIMS + ("--hardware", "{d}/shape.yaml"),
            r"drakit driver serve: {d}/shape\.yaml: line 1: invalid YAML: nested deeper than 100 levels", 2),
    Command("sample-claims-shape-bomb", {"shape.yaml": bomb()},
            ("driver", "sample-claims", "--driver", "gpu.acme.example.com", "--node", "n1", "--hardware", "{d}/shape.yaml"),
            r"drakit driver sample-claims: {d}/shape\.yaml: line 6: invalid YAML: aliases expand to more than 100,000", 2),
    Command("node-check-deep-claims", {"claims.json": "[" * 100_000, "r/.keep": ""},
            ("node-check", "--registry-dir", "{d}/r", "--driver", "gpu.acme.example.com", "--claims", "{d}/claims.json"),
            r"drakit node-check: {d}/claims\.json: nested deeper than 100 levels: not a claims file", 2),
    Command("controller-missing-kubeconfig", {}, ("driver", "controller", "--kubeconfig", "{d}/nowhere"),
            r"drakit driver controller: cannot load kubeconfig {d}/nowhere", 2),
    # -- options and paths ------------------------------------------------------------------------
    Command("run-out-not-a-folder", {"file": "x"}, ("run", "{valid}", "--out", "{d}/file/out"),
            r"drakit: --out {d}/file/out: cannot write there: Not a directory", 2),
    Command("report-out-not-a-folder", {"file": "x", "r.json": VALID_RESULTS}, ("report", "{d}/r.json", "--out", "{d}/file/x"),
            r"drakit: --out {d}/file/x: cannot write there: Not a directory", 2),
    Command("run-missing-path", {}, ("run", "{d}/nowhere", "--out", "{d}/out"), r"drakit: no such file or folder: {d}/nowhere", 2),
    Command("run-bad-max-case-size", {}, ("run", "{valid}", "--out", "{d}/out", "--max-case-size", "lots"),
            r"--max-case-size: 'lots' is not a size \(use e\.g\. 2000000, 512KiB, 4MiB\)", 2),
    Command("run-max-case-size-admits", {"big.case.yaml": _big(2 << 20)}, ("lint", "{d}/big.case.yaml", "--max-case-size", "4MiB"),
            r"1 files, 1 cases, 0 errors", 0),
    Command("run-unknown-backend", {}, ("run", "{valid}", "--out", "{d}/out", "--backend", "mainframe"), r"mainframe", 2),
    Command("run-bad-gates", {}, ("run", "{valid}", "--out", "{d}/out", "--feature-gates", "DRAEverything=maybe"), r"DRAEverything", 2),
    Command("lint-bad-max-case-size", {}, ("lint", "{valid}", "--max-case-size", "-5"), r"--max-case-size: '-5' is not a size", 2),
    Command("lint-missing-path", {}, ("lint", "{d}/nowhere"), r"drakit: no such file or folder: {d}/nowhere", 2),
    Command("lint-folder-without-cases", {"x/notes.txt": "no case here\n"}, ("lint", "{d}/x"),
            r"drakit lint: no \*\.case\.yaml file in {d}/x", 2),
    Command("report-no-arguments", {}, ("report",), r"drakit report: give RESULTS\.json", 2),
    Command("features-extra-argument", {}, ("features", "--colour"), r"--colour", 2),
    Command("unknown-command", {}, ("teleport",), r"teleport", 2),
)

