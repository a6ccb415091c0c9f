"""``drakit node-check``: conformance of a DRA driver's node side at the gRPC level, no kubelet.

``run_node_check(options)`` returns results.json case entries (backend ``node-plugin``);
``render_text`` makes the plain summary. Modules: ``catalog`` (the cases), ``checks`` (the
checker), ``calls`` (the gRPC calls), ``inspect`` (CDI specs and metadata files a prepare left),
``outcome`` (a case's result), ``apiclaims`` (claims node-check makes through the API server
with ``--kubeconfig``), ``cdi`` and ``metadata`` (the file formats), ``cli`` (the command).
"""

from .catalog import CASES
from .checks import NodeCheck
from .inputs import EXPECT_ANNOTATION, Options
from .outcome import BACKEND, decides_failure, is_finding, render_text


def run_node_check(options: Options) -> list[dict[str, object]]:
    return NodeCheck(options).run()


__all__ = ["BACKEND", "CASES", "EXPECT_ANNOTATION", "NodeCheck", "Options", "decides_failure", "is_finding",
           "render_text", "run_node_check"]
