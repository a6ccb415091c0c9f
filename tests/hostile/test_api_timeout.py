"""An API server that accepts the connection and never answers does not hang drakit (issue 25:
no call had a time bound): every call gets a (connect, read) timeout, DRAKIT_API_TIMEOUT the
read one."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path

from .inputs import VALID

KUBECONFIG = """\
apiVersion: v1
kind: Config
clusters: [{{name: c, cluster: {{server: "https://127.0.0.1:{port}", insecure-skip-tls-verify: true}}}}]
users: [{{name: u, user: {{token: not-a-secret}}}}]
contexts: [{{name: x, context: {{cluster: c, user: u}}}}]
current-context: x
"""


def test_a_server_that_never_answers_is_given_up_on(tmp_path: Path) -> None:
    with socket.socket() as silent:  # listens, accepts into its backlog, never says a word
        silent.bind(("127.0.0.1", 0))
        silent.listen(16)
        (tmp_path / "kubeconfig").write_text(KUBECONFIG.format(port=silent.getsockname()[1]))
        (tmp_path / "v.case.yaml").write_text(VALID)
        t0 = time.monotonic()
        proc = subprocess.run([sys.executable, "-m", "drakit.conformance.cli", "run", str(tmp_path / "v.case.yaml"),
                               "--backend", "cluster", "--kubeconfig", str(tmp_path / "kubeconfig"),
                               "--out", str(tmp_path / "out")], capture_output=True, text=True, timeout=180,
                              env={**os.environ, "DRAKIT_API_TIMEOUT": "2", "NO_COLOR": "1"})
        took = time.monotonic() - t0
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert "cannot reach the API server of context 'x'" in proc.stderr and "timed out" in proc.stderr, proc.stderr
    assert "Traceback" not in proc.stderr
    assert took < 90, f"{took:.0f} s"
