"""``drakit run --in-cluster --shards N``: drakit inside the cluster it tests.

``manifests`` writes what the run creates (a namespace, a ServiceAccount with narrow RBAC, the
case files as a ConfigMap, one Job per shard), ``frames`` how a shard's results and progress
travel back in its log, ``outcome`` what a shard's pod says about it (pure), and ``orchestrate``
creates, follows, brings back, merges and deletes.
"""
