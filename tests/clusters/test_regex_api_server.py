"""Regular expressions on the real 1.37.2 API server (issue 32): the table of
``tests/regex_table.py`` sent to the local control plane.

* Admission: a DeviceClass whose selector holds each pattern as a literal, once in ``matches``
  (cel-go's validator checks it when compiling) and once in ``find`` (Kubernetes' regex library
  compiles it when it makes the program), sent with dryRun: the API server accepts exactly the
  table's valid patterns and refuses the others with Go's error, and the reference's admission
  says the same, word for word.
* Matching: a ValidatingAdmissionPolicy whose message is ``matches``/``find``/``findAll`` of a
  ConfigMap's text and pattern (the same Go regexp the selectors run), so each row's results on
  the API server are read back and compared with the table and with the reference's engine.
"""

from __future__ import annotations

import json
import re
import time
from typing import Any

from drakit.conformance import goregex
from drakit.conformance.errors import ApiRejected
from drakit.conformance.features import DEFAULT_GATES
from drakit.conformance.validation.admit import admit
from tests.regex_table import MATCHES, REFUSED, VALID, expressions

PROBE = "drakit-regex-probe"
SEP = "\u241f"
MESSAGE = (f"strings.quote(string(object.data.text.matches(object.data.pattern))) + ' ' + "
           f"strings.quote(object.data.text.find(object.data.pattern)) + ' ' + "
           f"strings.quote(object.data.text.findAll(object.data.pattern).join('{SEP}'))")
POLICY = {
    "apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicy", "metadata": {"name": PROBE},
    "spec": {
        "failurePolicy": "Fail",
        "matchConstraints": {"resourceRules": [{"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"],
                                                "resources": ["configmaps"]}]},
        "matchConditions": [{"name": "probe",
                             "expression": f"has(object.metadata.labels) && '{PROBE}' in object.metadata.labels"}],
        "validations": [{"expression": "false", "messageExpression": MESSAGE}],
    },
}
BINDING = {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicyBinding",
           "metadata": {"name": PROBE}, "spec": {"policyName": PROBE, "validationActions": ["Deny"]}}


def _kube(cluster: Any) -> Any:
    from drakit.conformance.backends.kubeapi import KubeApi
    return KubeApi(str(cluster.kubeconfig))


def _sent(kube: Any, obj: dict[str, Any]) -> tuple[bool, str]:
    try:
        kube.dry_run(obj)
    except ApiRejected as exc:
        return False, str(exc)
    return True, ""


def test_the_api_server_refuses_what_the_reference_refuses_in_the_same_words(local_cluster: Any) -> None:
    kube = _kube(local_cluster)
    gates = {**DEFAULT_GATES, **dict(local_cluster.gates.get("kube-apiserver") or {})}
    problems, sent = [], 0
    for i, pattern in enumerate(VALID + list(REFUSED)):
        for form, expression in expressions(pattern).items():
            cls = {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": f"regex-{i}-{form}"},
                   "spec": {"selectors": [{"cel": {"expression": expression}}]}}
            ok, message = _sent(kube, cls)
            ours = admit(cls, gates=gates)
            sent += 1
            shown = pattern if len(pattern) < 40 else pattern[:20] + "..."
            if ok != (pattern in VALID) or (not ok and f"error parsing regexp: {REFUSED[pattern]}" not in message
                                             and form == "find"):
                problems.append(f"{shown!r} in {form}: the table is wrong: the API server says {message or 'accepted'!r}")
            if ok != ours.accepted or message != (ours.message if not ours.accepted else ""):
                problems.append(f"{shown!r} in {form}: API server {message or 'accepted'!r}; "
                                f"reference {ours.message or 'accepted'!r}")
    print(f"\n{sent} selectors sent to the API server")
    assert sent == 2 * (len(VALID) + len(REFUSED))
    assert not problems, "\n".join(problems)


def _probe(kube: Any, pattern: str, text: str) -> tuple[bool, str, list[str]] | None:
    cm = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "probe", "namespace": "default",
                                                                  "labels": {PROBE: "x"}},
          "data": {"pattern": pattern, "text": text}}
    ok, message = _sent(kube, cm)
    said = message.partition("denied request: ")[2]
    quoted = re.findall(r'"((?:[^"\\]|\\.)*)"', said)
    if ok or len(quoted) != 3:
        return None
    matched, found, listed = (json.loads(f'"{q}"') for q in quoted)
    return matched == "true", found, listed.split(SEP) if listed else []


def test_the_api_server_matches_as_the_reference_does(local_cluster: Any) -> None:
    kube = _kube(local_cluster)
    for obj in (POLICY, BINDING):
        try:
            kube.create(obj)
        except ApiRejected as exc:
            if "already exists" not in str(exc):
                raise
    try:
        deadline = time.monotonic() + 60
        while _probe(kube, "a", "a") is None:  # the policy takes effect within seconds
            assert time.monotonic() < deadline, "the regex probe policy never took effect"
            time.sleep(0.5)
        problems = []
        rows = MATCHES + [("(a+)+$", "a" * 5000 + "!", False, "", [])]
        for pattern, text, matched, found, all_found in rows:
            server = _probe(kube, pattern, text)
            compiled = goregex.compile(pattern)
            ours = (compiled.match(text), compiled.find(text), compiled.find_all(text))
            if server != (matched, found, all_found):
                problems.append(f"{pattern!r} on {text[:40]!r}: the table says {(matched, found, all_found)}, "
                                f"the API server {server}")
            if server != ours:
                problems.append(f"{pattern!r} on {text[:40]!r}: API server {server}, reference {ours}")
        assert not problems, "\n".join(problems)
    finally:
        for kind in ("ValidatingAdmissionPolicyBinding", "ValidatingAdmissionPolicy"):
            kube.resource("admissionregistration.k8s.io/v1", kind).delete(name=PROBE)


def test_constant_patterns_in_other_forms_are_checked_where_upstream_checks_them(local_cluster: Any) -> None:
    """cel-go's validator checks the first argument of ``matches`` when compiling: the pattern of
    ``text.matches(p)``, the text of ``matches(text, p)``. Kubernetes' environment also compiles
    every constant pattern of ``matches``/``find``/``findAll`` when it makes the program
    (``OptOptimize``), after folding a type conversion of a constant (``dyn('...')``)."""
    from tests.regex_table import cel_string
    kube = _kube(local_cluster)
    gates = {**DEFAULT_GATES, **dict(local_cluster.gates.get("kube-apiserver") or {})}
    forms = {"pattern first": "matches({p}, 'x')", "pattern second": "matches('x', {p})",
             "converted": "'x'.find(dyn({p})) == ''", "converted twice": "'x'.findAll(dyn(dyn({p}))) == []"}
    outcomes = {}
    for i, (pattern, (form, shape)) in enumerate([(p, f) for p in (r"(a)\1", r"\C", r"a+") for f in forms.items()]):
        cls = {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": f"regex-form-{i}"},
               "spec": {"selectors": [{"cel": {"expression": shape.format(p=cel_string(pattern))}}]}}
        ok, message = _sent(kube, cls)
        ours = admit(cls, gates=gates)
        assert (ok, message) == (ours.accepted, ours.message), (pattern, form, message)
        outcomes[(pattern, form)] = "accepted" if ok else "program" if "program instantiation failed" in message \
            else "compile" if "invalid matches argument" in message else message
    assert outcomes == {**{(p, f): "program" for p in (r"(a)\1", r"\C") for f in forms},
                        **{(p, "pattern first"): "compile" for p in (r"(a)\1", r"\C")},
                        **{("a+", f): "accepted" for f in forms}}, outcomes
