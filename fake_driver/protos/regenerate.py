"""Regenerate the Python gRPC stubs in ``fake_driver/_gen`` from the ``.proto`` files here.

Usage::

    python -m drakit.fake_driver.protos.regenerate          # rewrite fake_driver/_gen
    python -m drakit.fake_driver.protos.regenerate --check  # exit 1 if the committed stubs differ

The stubs are committed so that installing drakit needs grpcio only; grpcio-tools is needed
just to run this script (and its test). The generated files name the grpcio-tools and protobuf
versions they were made with, so regenerate with the pinned grpcio-tools only.

grpcio is a range in ``pyproject.toml``, not a pin: the service stubs refuse a grpcio older than
the ``GRPC_GENERATED_VERSION`` they carry, and what they call (``_registered_method=True``,
``add_registered_method_handlers``) is in grpcio since :data:`GRPC_LOWEST`, so that version is
written into them instead of grpcio-tools' own. CI runs the gRPC tests with grpcio at
:data:`GRPC_LOWEST` too (``.ci/run``), and ``tests/node/test_protos.py`` holds the range's lower
bound in ``pyproject.toml`` to it.

The ``.proto`` files are mapped to the virtual directory ``fake_driver/_gen`` when they are
compiled, so the generated service modules import their message modules as
``from drakit.fake_driver._gen import ...``. The ``package`` lines inside the files, not their names,
decide the gRPC method paths.
"""

from __future__ import annotations

import argparse
import filecmp
import re
import shutil
import sys
import tempfile
from pathlib import Path

PROTO_DIR = Path(__file__).resolve().parent
PACKAGE_DIR = PROTO_DIR.parent / "_gen"
VIRTUAL_DIR = "drakit/fake_driver/_gen"
PROTOS = (
    "pluginregistration_v1.proto",
    "dra_v1.proto",
    "dra_v1beta1.proto",
    "dra_health_v1.proto",
    "dra_health_v1alpha1.proto",
)
GENERATED_SUFFIXES = ("_pb2.py", "_pb2.pyi", "_pb2_grpc.py")
GRPC_LOWEST = "1.66.0"  # the lowest grpcio the stubs accept: pyproject.toml's lower bound
INIT_TEXT = '''"""Generated gRPC stubs for the kubelet plugin APIs. Do not edit.

Made by ``python -m drakit.fake_driver.protos.regenerate`` from ``fake_driver/protos/*.proto``.
"""
'''


class GenerateError(RuntimeError):
    """protoc failed or grpcio-tools is missing."""


def generate(out_root: Path) -> list[Path]:
    """Compile every proto into ``out_root/drakit/fake_driver/_gen``; returns the files written."""
    try:
        from grpc_tools import protoc
    except ImportError as err:  # pragma: no cover - depends on the environment
        raise GenerateError("grpcio-tools is not installed (pip install 'grpcio-tools==<pin>')") from err
    include = Path(protoc.__file__).parent / "_proto"
    args = [
        "grpc_tools.protoc",
        f"-I{VIRTUAL_DIR}={PROTO_DIR}",
        f"-I{include}",
        f"--python_out={out_root}",
        f"--pyi_out={out_root}",
        f"--grpc_python_out={out_root}",
        *(str(PROTO_DIR / name) for name in PROTOS),
    ]
    code = protoc.main(args)
    if code != 0:
        raise GenerateError(f"protoc failed with exit code {code}")
    target = out_root / VIRTUAL_DIR
    (target / "__init__.py").write_text(INIT_TEXT, encoding="utf-8")
    for stub in target.glob("*_pb2_grpc.py"):
        text = stub.read_text(encoding="utf-8")
        floored = re.sub(r"^GRPC_GENERATED_VERSION = '[^']*'$", f"GRPC_GENERATED_VERSION = '{GRPC_LOWEST}'", text,
                         count=1, flags=re.M)
        if floored == text:
            raise GenerateError(f"{stub.name}: no GRPC_GENERATED_VERSION line to set to {GRPC_LOWEST}")
        stub.write_text(floored, encoding="utf-8")
    return sorted(target.iterdir())


def generated_names() -> list[str]:
    """The file names ``generate`` produces, ``__init__.py`` included."""
    stems = [name.removesuffix(".proto") for name in PROTOS]
    return sorted(["__init__.py", *(stem + suffix for stem in stems for suffix in GENERATED_SUFFIXES)])


def differences(package_dir: Path = PACKAGE_DIR) -> list[str]:
    """File names whose committed content differs from a fresh generation (or that are stale)."""
    with tempfile.TemporaryDirectory(prefix="drakit-gen-") as tmp:
        fresh = {p.name: p for p in generate(Path(tmp))}
        committed = {p.name: p for p in package_dir.iterdir()
                     if p.is_file() and p.name.endswith((".py", ".pyi"))} if package_dir.is_dir() else {}
        names = sorted(set(fresh) | set(committed))
        return [n for n in names
                if n not in fresh or n not in committed
                or not filecmp.cmp(fresh[n], committed[n], shallow=False)]


def regenerate(package_dir: Path = PACKAGE_DIR) -> list[str]:
    """Replace the generated files in ``package_dir``; returns the names that changed."""
    changed = differences(package_dir)
    package_dir.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="drakit-gen-") as tmp:
        fresh = {p.name: p for p in generate(Path(tmp))}
        for name in changed:
            if name in fresh:
                shutil.copyfile(fresh[name], package_dir / name)
            else:
                (package_dir / name).unlink()
    return changed


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m drakit.fake_driver.protos.regenerate",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true",
                        help="only compare; exit 1 when the committed stubs are out of date")
    args = parser.parse_args(argv)
    try:
        if args.check:
            diff = differences()
            for name in diff:
                print(f"out of date: fake_driver/_gen/{name}")
            return 1 if diff else 0
        for name in regenerate():
            print(f"wrote fake_driver/_gen/{name}")
    except GenerateError as err:
        print(f"regenerate: {err}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
