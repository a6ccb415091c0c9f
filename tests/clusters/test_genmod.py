"""drakit.clusters.local.genmod: the build module derived from upstream's go.mod text (no Go needed)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from drakit.clusters.local import genmod

SAMPLE = """\
// This is a generated file. Do not edit directly.

module k8s.io/kubernetes

go 1.26.0

godebug default=go1.26

require (
\tgithub.com/blang/semver/v4 v4.0.0
\tk8s.io/api v0.0.0
\tk8s.io/streaming v0.0.0 // indirect
)

replace github.com/example/forked => github.com/example/forked v1.2.3 // carried over

replace (
\tk8s.io/api => ./staging/src/k8s.io/api
\tk8s.io/apimachinery => ./staging/src/k8s.io/apimachinery
\t// a comment inside the block
\tk8s.io/streaming => ./staging/src/k8s.io/streaming
)
"""


def test_staging_replaces_point_at_published_tags():
    reps = {r.left: r.right for r in genmod.derive_replaces(SAMPLE, "v1.37.2")}
    assert reps["k8s.io/api"] == "k8s.io/api v0.37.2"
    assert reps["k8s.io/apimachinery"] == "k8s.io/apimachinery v0.37.2"
    assert reps["k8s.io/streaming"] == "k8s.io/streaming v0.37.2"


def test_non_staging_replace_is_copied():
    reps = {r.left: r.right for r in genmod.derive_replaces(SAMPLE, "v1.37.2")}
    assert reps["github.com/example/forked"] == "github.com/example/forked v1.2.3"


def test_render_has_go_godebug_tools_require_and_sorted_replaces():
    text = genmod.render(SAMPLE, "v1.37.2")
    assert "module drakit.local/k8sbins\n" in text
    assert "\ngo 1.26.0\n" in text
    assert "\ngodebug default=go1.26\n" in text
    assert "\trequire" not in text and "require k8s.io/kubernetes v1.37.2\n" in text
    for cmd in ("kube-apiserver", "kube-controller-manager", "kube-scheduler"):
        assert f"\tk8s.io/kubernetes/cmd/{cmd}\n" in text
    block = [ln.strip() for ln in text.split("replace (\n", 1)[1].split(")", 1)[0].strip().splitlines()]
    assert block == sorted(block)
    assert "./staging" not in text


def test_prerelease_version():
    assert genmod.staging_version("v1.37.0-rc.1") == "v0.37.0-rc.1"


@pytest.mark.parametrize("bad", ["1.37.2", "v2.0.0", "v1.37"])
def test_bad_version(bad):
    with pytest.raises(genmod.GenModError):
        genmod.staging_version(bad)


def test_not_kubernetes_gomod_is_rejected():
    with pytest.raises(genmod.GenModError, match="no ./staging/src"):
        genmod.derive_replaces("module x\n\ngo 1.26\n", "v1.37.2")


def test_other_local_replace_is_rejected():
    text = SAMPLE + "replace example.com/x => ../x\n"
    with pytest.raises(genmod.GenModError, match="non-staging local replace"):
        genmod.derive_replaces(text, "v1.37.2")


def test_committed_gomod_matches_the_generator_shape():
    """The committed go.mod was produced by render(): every staging module at v0.37.2."""
    gomod = (Path(genmod.__file__).parent / "k8sbins" / "go.mod").read_text()
    assert re.search(r"^\s*(require )?k8s.io/kubernetes v1\.37\.2\b", gomod, re.M)
    for mod in ("api", "apimachinery", "client-go", "dynamic-resource-allocation", "kube-scheduler"):
        assert f"\tk8s.io/{mod} => k8s.io/{mod} v0.37.2\n" in gomod
    assert (Path(genmod.__file__).parent / "k8sbins" / "go.sum").is_file()
