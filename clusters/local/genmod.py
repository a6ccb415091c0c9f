"""Generate the Go build module that compiles the Kubernetes control plane.

``k8s.io/kubernetes`` pins its staging modules (``k8s.io/api``, ``k8s.io/client-go`` ...)
at ``v0.0.0`` and resolves them through ``replace`` directives pointing into
``./staging/src``.  Replace directives of a dependency are ignored by the main module, so
a module that builds ``k8s.io/kubernetes/cmd/...`` has to map every staging module itself.

This generator reads the tag's own go.mod (as served by the Go module proxy, through
``go list -m -json``) and turns each ``k8s.io/X => ./staging/src/k8s.io/X`` replace into
``k8s.io/X => k8s.io/X v0.<minor>.<patch>``.  Non-staging replaces are copied verbatim.

Usage::

    python -m drakit.clusters.local.genmod [--version v1.37.2] [--write]

``--write`` writes ``clusters/local/k8sbins/go.mod`` and runs ``go mod tidy`` there so
that ``go.sum`` is complete; both files are committed. ``--module testdriverbin`` does the same
for the module that builds upstream's e2e DRA test driver (the foreign driver drakit's driver
suite is proven on), kept apart so its go.sum never conflicts with the control plane's.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

KUBE_VERSION = "v1.37.2"
MODULE_PATH = "drakit.local/k8sbins"
K8S_COMMANDS = (
    "k8s.io/kubernetes/cmd/kube-apiserver",
    "k8s.io/kubernetes/cmd/kube-controller-manager",
    "k8s.io/kubernetes/cmd/kube-scheduler",
    "k8s.io/kubernetes/cmd/kubelet",
)
TEST_DRIVER_COMMAND = "k8s.io/kubernetes/test/e2e/dra/test-driver"
# folder next to this file -> (module path, commands, what it builds)
MODULES: dict[str, tuple[str, tuple[str, ...], str]] = {
    "k8sbins": (MODULE_PATH, K8S_COMMANDS, "control plane and kubelet"),
    "testdriverbin": ("drakit.local/testdriverbin", (TEST_DRIVER_COMMAND,), "e2e DRA test driver"),
}

_STAGING_RE = re.compile(r"^(?P<mod>\S+)\s*=>\s*\./staging/src/(?P<path>\S+)\s*$")
_GO_RE = re.compile(r"^go\s+(\S+)\s*$", re.M)
_GODEBUG_RE = re.compile(r"^godebug\s+(.+)$", re.M)


class GenModError(Exception):
    """The upstream go.mod could not be turned into a build module."""


@dataclass(frozen=True, slots=True)
class Replace:
    """One replace directive as ``left => right`` (right may have a version)."""

    left: str
    right: str


def staging_version(kube_version: str) -> str:
    """``v1.37.2`` -> ``v0.37.2`` (the staging modules' tag for a kubernetes tag)."""
    m = re.fullmatch(r"v1\.(\d+)\.(\d+)(-[0-9A-Za-z.-]+)?", kube_version)
    if not m:
        raise GenModError(f"not a Kubernetes v1.x.y version: {kube_version!r}")
    return f"v0.{m.group(1)}.{m.group(2)}{m.group(3) or ''}"


def _replace_lines(gomod: str) -> list[str]:
    """Every replace directive's body (``left => right``), single-line and block forms."""
    out: list[str] = []
    in_block = False
    for raw in gomod.splitlines():
        line = raw.split("//", 1)[0].strip()
        if not line:
            continue
        if in_block:
            if line == ")":
                in_block = False
            else:
                out.append(line)
            continue
        if re.fullmatch(r"replace\s*\(", line):
            in_block = True
        elif line.startswith("replace "):
            out.append(line[len("replace ") :].strip())
    if in_block:
        raise GenModError("unterminated replace ( block in upstream go.mod")
    return out


def derive_replaces(gomod: str, kube_version: str) -> list[Replace]:
    """The replace set a consumer needs, derived from upstream's go.mod text."""
    sv = staging_version(kube_version)
    result: list[Replace] = []
    for body in _replace_lines(gomod):
        m = _STAGING_RE.match(body)
        if m:
            mod = m.group("mod")
            if m.group("path") != mod:
                raise GenModError(f"staging replace with unexpected path: {body!r}")
            result.append(Replace(mod, f"{mod} {sv}"))
            continue
        if "=>" not in body:
            raise GenModError(f"malformed replace directive: {body!r}")
        left, right = (s.strip() for s in body.split("=>", 1))
        if right.startswith(("./", "../", "/")):
            raise GenModError(f"non-staging local replace cannot be carried over: {body!r}")
        result.append(Replace(left, right))
    if not any(r.right.endswith(" " + sv) for r in result):
        raise GenModError("upstream go.mod has no ./staging/src replaces; is this k8s.io/kubernetes?")
    return sorted(result, key=lambda r: r.left)


def render(gomod: str, kube_version: str, commands: tuple[str, ...] = K8S_COMMANDS,
           module_path: str = MODULE_PATH, what: str = "control plane") -> str:
    """Text of the build module's go.mod."""
    go = _GO_RE.search(gomod)
    if not go:
        raise GenModError("upstream go.mod has no go directive")
    godebug = _GODEBUG_RE.search(gomod)
    lines = [
        "// Code generated by clusters/local/genmod.py; DO NOT EDIT.",
        f"// Builds the Kubernetes {kube_version} {what} from the Go module proxy.",
        "",
        f"module {module_path}",
        "",
        f"go {go.group(1)}",
        "",
    ]
    if godebug:
        lines += [f"godebug {godebug.group(1).strip()}", ""]
    lines += ["tool ("] + [f"\t{c}" for c in commands] + [")", ""]
    lines += [f"require k8s.io/kubernetes {kube_version}", ""]
    lines += ["replace ("]
    lines += [f"\t{r.left} => {r.right}" for r in derive_replaces(gomod, kube_version)]
    lines += [")", ""]
    return "\n".join(lines)


def go_env() -> dict[str, str]:
    env = dict(os.environ)
    env.setdefault("GOTOOLCHAIN", "local")
    env["GOFLAGS"] = (env.get("GOFLAGS", "") + " -mod=mod").strip()
    return env


def fetch_upstream_gomod(kube_version: str) -> str:
    """The go.mod of ``k8s.io/kubernetes@<version>`` as the module proxy serves it."""
    proc = subprocess.run(
        ["go", "list", "-m", "-json", f"k8s.io/kubernetes@{kube_version}"],
        capture_output=True,
        text=True,
        env=go_env(),
        cwd=os.path.expanduser("~"),
        check=False,
    )
    if proc.returncode != 0:
        raise GenModError(f"go list -m k8s.io/kubernetes@{kube_version} failed: {proc.stderr.strip()}")
    info = json.loads(proc.stdout)
    path = info.get("GoMod")
    if not path:
        raise GenModError("go list gave no GoMod path")
    return Path(path).read_text()


def module_dir(name: str = "k8sbins") -> Path:
    return Path(__file__).resolve().parent / name


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--version", default=KUBE_VERSION)
    ap.add_argument("--module", default="k8sbins", choices=sorted(MODULES), help="which build module")
    ap.add_argument("--write", action="store_true", help="write <module>/go.mod and tidy go.sum")
    args = ap.parse_args(argv)
    module_path, commands, what = MODULES[args.module]
    try:
        text = render(fetch_upstream_gomod(args.version), args.version, commands, module_path, what)
    except GenModError as e:
        print(f"genmod: {e}", file=sys.stderr)
        return 1
    if not args.write:
        sys.stdout.write(text)
        return 0
    d = module_dir(args.module)
    d.mkdir(parents=True, exist_ok=True)
    (d / "go.mod").write_text(text)
    proc = subprocess.run(["go", "mod", "tidy"], cwd=d, env=go_env(), check=False)
    if proc.returncode != 0:
        print("genmod: go mod tidy failed", file=sys.stderr)
        return 1
    print(f"wrote {d / 'go.mod'} and go.sum")
    return 0


if __name__ == "__main__":
    sys.exit(main())
