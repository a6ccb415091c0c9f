"""The Docker side of the kind provider: does an engine answer (kind needs one).

Asked through testcontainers' Docker client (the ``kind`` extra: ``pip install
'drakit[kind]'``) when it is installed, and through the ``docker`` CLI otherwise. drakit's images
are built without Docker (:mod:`clusters.images`).
"""

from __future__ import annotations

import shutil
import subprocess


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
