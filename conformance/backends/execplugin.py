"""A kubeconfig's exec credential plugin, bounded: it answers within a time budget or is
stopped, and it never outlives drakit.

The kubernetes client runs ``users[].user.exec`` with ``subprocess.Popen(...).communicate()``
and waits for ever: a plugin that hangs (a login prompt nobody sees, a dead network) hung
``drakit run``, and a SIGTERM to drakit left the plugin running, orphaned. :func:`install`
gives the client's exec module a ``Popen`` that

- waits at most :func:`timeout` seconds (``DRAKIT_EXEC_PLUGIN_TIMEOUT`` changes it), then kills
  the plugin and fails with one line naming it and the budget;
- kills the plugin when the wait is broken (SIGINT/SIGTERM reach drakit as KeyboardInterrupt);
- starts it with ``PR_SET_PDEATHSIG`` (util-linux ``setpriv``, when on PATH), so a SIGKILLed
  drakit takes the plugin with it.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import types
from typing import Any

DEFAULT_TIMEOUT = 60.0
TIMEOUT_ENV = "DRAKIT_EXEC_PLUGIN_TIMEOUT"
FAILURES: list[str] = []  # plugins stopped for their budget, newest last


def timeout() -> float:
    raw = os.environ.get(TIMEOUT_ENV, "")
    try:
        value = float(raw)
    except ValueError:
        return DEFAULT_TIMEOUT
    return value if 0 < value <= 3600 else DEFAULT_TIMEOUT


class BoundedPopen(subprocess.Popen):  # type: ignore[type-arg]
    """``Popen`` whose ``communicate`` is bounded and kills the child on any way out but success."""

    def __init__(self, args: Any, *rest: Any, **kwargs: Any) -> None:
        self.plugin = str(args[0] if isinstance(args, (list, tuple)) and args else args)
        setpriv = shutil.which("setpriv")
        if setpriv and isinstance(args, (list, tuple)) and not kwargs.get("shell"):
            args = [setpriv, "--pdeathsig", "KILL", "--", *args]  # no Python between fork and exec
        super().__init__(args, *rest, **kwargs)

    def communicate(self, input: Any = None, timeout: float | None = None) -> Any:  # noqa: A002 - Popen's name
        budget = _budget() if timeout is None else timeout
        try:
            return super().communicate(input, timeout=budget)
        except subprocess.TimeoutExpired:
            self._stop()
            from kubernetes.config.config_exception import ConfigException
            message = (f"exec: the credential plugin {self.plugin!r} gave no answer within {budget:g} s and was "
                       f"stopped ({TIMEOUT_ENV}=SECONDS changes the budget)")
            FAILURES.append(message)  # the client logs and swallows it while loading a kubeconfig
            raise ConfigException(message) from None
        except BaseException:
            self._stop()
            raise

    def _stop(self) -> None:
        try:
            self.kill()
            self.wait(5)
        except (OSError, subprocess.TimeoutExpired):
            pass


def _budget() -> float:
    return timeout()


def install() -> None:
    """Make the kubernetes client start exec plugins through :class:`BoundedPopen` (once)."""
    from kubernetes.config import exec_provider
    current = getattr(exec_provider, "subprocess", None)
    if getattr(current, "Popen", None) is BoundedPopen:
        return
    shim = types.ModuleType("subprocess")
    shim.__dict__.update({k: getattr(subprocess, k) for k in dir(subprocess) if not k.startswith("__")})
    shim.Popen = BoundedPopen  # type: ignore[attr-defined]
    exec_provider.subprocess = shim  # type: ignore[attr-defined]
