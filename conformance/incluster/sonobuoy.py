"""drakit as a sonobuoy plugin: ``drakit sonobuoy-plugin`` prints the plugin definition, and
``drakit run --sonobuoy`` hands the run's reports over the way a plugin does.

The definition is a Job plugin (one pod for the cluster) with ``result-format: junit``: its
container runs ``drakit run --backend cluster`` with the pod's service account (sonobuoy's),
then puts ``junit.xml``, ``results.json`` and ``report.html`` in a tarball in sonobuoy's results
folder (``$SONOBUOY_RESULTS_DIR``, which sonobuoy sets, else ``$RESULTS_DIR``, else
``/tmp/sonobuoy/results``) and writes the tarball's path to the ``done`` file there, which
sonobuoy's worker waits for. ``result-files`` names ``junit.xml``, so sonobuoy's junit
post-processing reads that one file. The pod's ``/tmp`` is an extra emptyDir volume (the image's
root file system is not written to). A vendor profile (``--vendor``) travels in the definition's
``config-map`` (file name -> text), which ``sonobuoy gen`` turns into a ConfigMap mounted in the
plugin's container at ``/tmp/sonobuoy/config``; the plugin's ``drakit run --vendor`` reads it there.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
import tarfile
from pathlib import Path
from typing import Any

import yaml

RESULTS_DIR = "/tmp/sonobuoy/results"
CONFIG_DIR = "/tmp/sonobuoy/config"  # where sonobuoy mounts a plugin's config-map
TARBALL = "drakit-results.tar.gz"
OUT = "/tmp/drakit-out"


def plugin_definition(image: str, version: str, run_args: list[str],
                      profile: tuple[str, str] | None = None) -> dict[str, Any]:
    """The plugin; *profile*: a vendor profile's ``(file name, text)``, carried in ``config-map``."""
    vendor: list[str] = []
    extra: dict[str, Any] = {}
    if profile is not None:
        name = profile[0] if re.fullmatch(r"[-._a-zA-Z0-9]+", profile[0]) and profile[0] not in (".", "..") \
            else "vendor-profile.yaml"  # a ConfigMap key
        vendor = ["--vendor", f"{CONFIG_DIR}/{name}"]
        extra = {"config-map": {name: profile[1]}}
    return {
        "sonobuoy-config": {
            "driver": "Job",
            "plugin-name": "drakit",
            "result-format": "junit",
            "result-files": ["junit.xml"],
            "description": f"drakit {version}: Kubernetes 1.37 Dynamic Resource Allocation conformance",
        },
        "spec": {
            "name": "plugin",
            "image": image,
            "imagePullPolicy": "IfNotPresent",
            "command": ["drakit", "run", "--backend", "cluster", "--out", OUT, "--plain", "--sonobuoy", *vendor,
                        *run_args],
            "env": [{"name": "TMPDIR", "value": "/tmp"}, {"name": "HOME", "value": "/tmp"}],
            "securityContext": {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]},
                                "runAsNonRoot": True, "runAsUser": 65532},
            "volumeMounts": [{"name": "results", "mountPath": RESULTS_DIR},
                             {"name": "drakit-tmp", "mountPath": "/tmp"}],
        },
        "extra-volumes": [{"name": "drakit-tmp", "emptyDir": {}}],
        **extra,
    }


def add_parsers(sub: Any) -> None:
    p = sub.add_parser("sonobuoy-plugin", help="print drakit's sonobuoy plugin definition (sonobuoy run --plugin FILE)",
                       description="Print a sonobuoy Job plugin (result-format: junit) that runs drakit's suites "
                                   "in the cluster: drakit sonobuoy-plugin > drakit.yaml; sonobuoy run --plugin "
                                   "drakit.yaml. Arguments after -- are added to its 'drakit run', e.g. -- -m "
                                   "feature_core.")
    p.add_argument("--image", default=None, help="the drakit image (default: drakit/fake-driver:<version>)")
    p.add_argument("--vendor", "--profile", dest="vendor", default=None, metavar="PROFILE",
                   help="vendor profile YAML, carried in the plugin's config-map (sonobuoy mounts it in its "
                        "config folder, $SONOBUOY_CONFIG_DIR) and given to its drakit run")
    p.add_argument("run_args", nargs=argparse.REMAINDER, help="arguments for drakit run in the plugin, after --")


def run(args: argparse.Namespace) -> int:
    from drakit.conformance.results import _kit_version
    from .run import default_image
    from .run import vendor_profile
    extra = [a for a in args.run_args if a != "--"] if args.run_args[:1] == ["--"] else list(args.run_args)
    try:
        profile = vendor_profile(args.vendor)
    except ValueError as exc:
        print(f"drakit sonobuoy-plugin: {exc}", file=sys.stderr)
        return 2
    text = yaml.dump(plugin_definition(args.image or default_image(), _kit_version(), extra, profile),
                     Dumper=_Dumper, sort_keys=False)
    sys.stdout.write(text)
    return 0


class _Dumper(yaml.SafeDumper):
    """Multi-line strings (the profile in config-map) as literal blocks, readable as the file was."""


def _str(dumper: yaml.SafeDumper, text: str) -> yaml.Node:
    return dumper.represent_scalar("tag:yaml.org,2002:str", text, style="|" if "\n" in text else None)


_Dumper.add_representer(str, _str)


def results_dir(environ: Any = None) -> Path:
    env = os.environ if environ is None else environ
    return Path(env.get("SONOBUOY_RESULTS_DIR") or env.get("RESULTS_DIR") or RESULTS_DIR)


def hand_over(out: Path, environ: Any = None) -> Path:
    """Tar the reports in *out* into sonobuoy's results folder and write its ``done`` file
    (the tarball's path); the tarball."""
    import io
    from drakit.reports.safefs import write_file
    folder = results_dir(environ)
    packed = io.BytesIO()
    with tarfile.open(fileobj=packed, mode="w:gz") as tar:
        for name in ("junit.xml", "results.json", "report.html"):
            if (out / name).is_file() and not (out / name).is_symlink():  # never a link's target
                tar.add(out / name, arcname=name)
    tarball = write_file(folder, TARBALL, packed.getvalue())  # never through a link either
    write_file(folder, "done", str(tarball))
    return tarball
