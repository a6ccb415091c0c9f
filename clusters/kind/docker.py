"""The Docker side of the kind provider: is an engine there, and building the driver image.

Both go through testcontainers' Docker client (the ``kind`` extra: ``pip install
'drakit[kind]'``) when it is installed, and through the ``docker`` CLI otherwise.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

from drakit import fake_driver

DOCKERFILE = "fake_driver/Dockerfile"


class ImageError(Exception):
    """The driver image could not be built; the message says why, on one line."""


def one_line(text: object, limit: int = 300) -> str:
    """The first non-empty line of ``text``, shortened: error details must not break the line."""
    for line in str(text).splitlines():
        if line.strip():
            line = line.strip()
            return line if len(line) <= limit else line[: limit - 3] + "..."
    return type(text).__name__ if isinstance(text, BaseException) else ""


def engine_problem() -> str | None:
    """Why no Docker engine can be used here, or None when one answers."""
    try:
        from testcontainers.core.docker_client import DockerClient
    except ImportError:
        DockerClient = None  # type: ignore[assignment,misc]
    if DockerClient is not None:
        try:
            client = DockerClient()
        except Exception as exc:  # docker.errors.DockerException: no socket, refused, bad DOCKER_HOST
            return f"no Docker engine answers ({one_line(exc)})"
        try:
            client.client.ping()
        except Exception as exc:
            return f"the Docker engine does not answer a ping ({one_line(exc)})"
        finally:
            client.client.close()
        return None
    docker = shutil.which("docker")
    if docker is None:
        return "no docker CLI on PATH and no testcontainers installed (pip install 'drakit[kind]')"
    try:
        proc = subprocess.run([docker, "version", "--format", "{{.Server.Version}}"],
                              capture_output=True, text=True, timeout=60, check=False)
    except subprocess.TimeoutExpired:
        return "no Docker engine answers (docker version timed out)"
    if proc.returncode != 0 or not proc.stdout.strip():
        return f"no Docker engine answers ({one_line(proc.stderr) or 'docker version failed'})"
    return None


def source_root() -> Path:
    """The drakit source tree holding ``pyproject.toml`` and the Dockerfile (the build context)."""
    root = Path(fake_driver.__file__).resolve().parent.parent
    if not (root / "pyproject.toml").is_file() or not (root / DOCKERFILE).is_file():
        raise ImageError(f"building the driver image needs the drakit source tree ({DOCKERFILE} and "
                         f"pyproject.toml), not found under {root}; build the image elsewhere and "
                         f"pass it with --image and --no-build")
    return root


def build_image(tag: str, context: Path | None = None) -> str:
    """Build ``fake_driver/Dockerfile`` as ``tag``; returns the tool used (for progress lines)."""
    root = context or source_root()
    try:
        from testcontainers.core.image import DockerImage
    except ImportError:
        DockerImage = None  # type: ignore[assignment,misc]
    if DockerImage is not None:
        try:
            # clean_up=False: the image must outlive this call, kind loads it next
            DockerImage(path=root, dockerfile_path=DOCKERFILE, tag=tag, clean_up=False).build()
        except Exception as exc:  # docker.errors.BuildError / APIError
            raise ImageError(f"building {tag} from {root / DOCKERFILE} failed: {one_line(exc)}") from None
        return "testcontainers"
    docker = shutil.which("docker")
    if docker is None:
        raise ImageError("building the driver image needs the docker CLI or testcontainers (pip install 'drakit[kind]')")
    proc = subprocess.run([docker, "build", "-f", str(root / DOCKERFILE), "-t", tag, str(root)],
                          capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        last = [ln for ln in proc.stderr.splitlines() if ln.strip()][-1:] or ["docker build failed"]
        raise ImageError(f"building {tag} from {root / DOCKERFILE} failed: {one_line(last[0])}")
    return "docker CLI"
