"""``drakit node-check``: conformance of a DRA driver's node side at the gRPC level, no cluster.

``run_node_check(options)`` returns results.json case entries (backend ``node-plugin``);
``render_text`` makes the plain summary. The CLI is in ``conformance.nodecheck.cli``.
"""

from .checks import BACKEND, CASES, EXPECT_ANNOTATION, NodeCheck, Options, render_text


def run_node_check(options: Options) -> list[dict[str, object]]:
    return NodeCheck(options).run()


__all__ = ["BACKEND", "CASES", "EXPECT_ANNOTATION", "NodeCheck", "Options", "render_text",
           "run_node_check"]
