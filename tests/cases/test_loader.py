"""Case loading: every kind of bad input gives one line with file and line, and the good cases
in the same file still load."""

from __future__ import annotations

from drakit.fake_driver.profile import load_profile

from drakit.conformance.cases.loader import load_text

PROFILE = load_profile()

GOOD = """\
id: t/good
title: good
features: [core]
steps:
  - apply:
      apiVersion: resource.k8s.io/v1
      kind: ResourceClaim
      metadata: {name: c}
      spec:
        devices:
          requests:
            - name: gpu
              exactly: {deviceClassName: "${class.gpu}"}
"""


def load(text: str):
    return load_text(text, "x.case.yaml", PROFILE)


def test_good_case_loads_with_placeholders_resolved() -> None:
    res = load(GOOD)
    assert not res.errors
    (case,) = res.cases
    assert case.id == "t/good" and case.backends == ("reference", "cluster") and case.profile == "required"
    manifest = case.steps[0].manifests[0]
    assert manifest["spec"]["devices"]["requests"][0]["exactly"]["deviceClassName"] == PROFILE["class.gpu"]


def test_yaml_syntax_error_is_one_line_with_position() -> None:
    res = load("id: t/x\ntitle: [unclosed\nfeatures: [core]\n")
    assert not res.cases
    (err,) = res.errors
    assert str(err).startswith("x.case.yaml:3: YAML:")


def test_unknown_key_names_the_field_and_line() -> None:
    res = load(GOOD.replace("features: [core]", "features: [core]\nfeaturez: [x]"))
    (err,) = res.errors
    assert str(err).startswith("x.case.yaml:4: featurez: unknown field")


def test_unknown_key_inside_a_step() -> None:
    res = load(GOOD.replace("  - apply:", "  - aply:"))
    (err,) = res.errors
    assert "x.case.yaml:5: steps[0].aply: unknown field" in str(err)


def test_invalid_cel_selector() -> None:
    text = GOOD.replace('exactly: {deviceClassName: "${class.gpu}"}',
                        'exactly: {deviceClassName: "${class.gpu}", selectors: [{cel: {expression: "device.driver =="}}]}')
    (err,) = load(text).errors
    assert str(err).startswith("x.case.yaml:13: steps[0].apply.spec.devices.requests[0].exactly.selectors[0].cel.expression: compilation failed")


def test_validation_limit_request_name_must_be_dns_label() -> None:
    (err,) = load(GOOD.replace("- name: gpu", "- name: GPU_0")).errors
    assert str(err).startswith("x.case.yaml:12: steps[0].apply.spec.devices.requests[0].name: must be a DNS label")


def test_validation_limit_too_many_subrequests() -> None:
    subs = "\n".join(f"                - {{name: s{i}, deviceClassName: x}}" for i in range(9))
    text = GOOD.replace('              exactly: {deviceClassName: "${class.gpu}"}', "              firstAvailable:\n" + subs)
    (err,) = load(text).errors
    assert "requests[0].firstAvailable: must have at most 8 items, got 9" in str(err)
    assert str(err).startswith("x.case.yaml:13:")


def test_unknown_placeholder_is_a_load_error() -> None:
    (err,) = load(GOOD.replace("${class.gpu}", "${class.nope}")).errors
    assert "x.case.yaml:13:" in str(err) and "unknown placeholder ${class.nope}" in str(err)


def test_unknown_feature() -> None:
    (err,) = load(GOOD.replace("features: [core]", "features: [nope]")).errors
    assert str(err).startswith("x.case.yaml:3: features[0]: unknown feature 'nope'")


def test_one_bad_document_does_not_hide_the_others() -> None:
    bad = GOOD.replace("t/good", "t/bad").replace("- name: gpu", "- name: GPU")
    res = load(GOOD + "---\n" + bad + "---\n" + GOOD.replace("t/good", "t/good2"))
    assert [c.id for c in res.cases] == ["t/good", "t/good2"]
    (err,) = res.errors
    assert err.line == 26  # the request name line of the second document


def test_duplicate_ids_and_duplicate_keys() -> None:
    res = load(GOOD + "---\n" + GOOD)
    assert len(res.cases) == 1 and "and x.case.yaml:" in str(res.errors[0]) and "id 't/good' defined twice" in str(res.errors[0])
    (err,) = load(GOOD.replace("title: good", "title: good\ntitle: again")).errors
    assert "duplicate key 'title'" in str(err)


def test_expect_error_steps_skip_manifest_validation() -> None:
    text = GOOD.replace("- name: gpu", "- name: GPU").replace("  - apply:", "  - expectError: must be a DNS label\n    apply:")
    res = load(text)
    assert not res.errors and res.cases[0].steps[0].expect_error == "must be a DNS label"


def test_constraint_names_must_resolve_to_a_request_or_subrequest() -> None:
    text = GOOD.replace('              exactly: {deviceClassName: "${class.gpu}"}',
                        '              exactly: {deviceClassName: "${class.gpu}"}\n'
                        '          constraints:\n            - {requests: [gpu/typo], matchAttribute: "${attr.gpu.numa}"}')
    (err,) = load(text).errors
    assert "constraints[0].requests[0]: must be the name of a request in the claim or the name of a request and a subrequest" in str(err)


def test_placeholders_in_mapping_keys_are_resolved() -> None:
    text = GOOD.replace("  - apply:", "  - apply:\n      - apiVersion: v1\n        kind: Pod\n        metadata: {name: p, annotations: {\"${driver.gpu}\": x}}\n        spec: {containers: [{name: c, image: i}]}\n    name: s\n  - apply:")
    res = load(text)
    assert not res.errors, res.errors
    assert res.cases[0].steps[0].manifests[0]["metadata"]["annotations"] == {PROFILE["driver.gpu"]: "x"}


import pytest  # noqa: E402


@pytest.mark.parametrize("tail", ["\\n", "\\r\\n", " ", "\\t", "\\x1b[31m", "\\0", "\\u2028"])
def test_a_case_id_with_a_trailing_control_character_or_space_is_refused(tail: str) -> None:
    """Issue 32: ``id: "t/good\\n"`` was accepted (Python's ``$`` matches before a final newline)
    and slipped past the duplicate-id check beside ``t/good``."""
    twin = GOOD.replace("id: t/good", f'id: "t/good{tail}"')
    res = load(GOOD + "---\n" + twin)
    assert [c.id for c in res.cases] == ["t/good"]
    (err,) = res.errors
    assert "x.case.yaml:" in str(err) and "id:" in str(err) and "\n" not in str(err), str(err)


def test_json_schema_dollar_matches_at_the_end_only() -> None:
    from drakit.conformance.schemas import ecma_regex
    assert ecma_regex("^a$").search("a") and not ecma_regex("^a$").search("a\n")
    assert ecma_regex("^[$]+$").search("$$") and not ecma_regex("^[$]+$").search("$\n")
    assert ecma_regex(r"^\$$").search("$")
