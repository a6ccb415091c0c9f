"""What the cluster benchmarks share (``bench_cluster.py``, ``bench_prequeue.py``): the API client
that creates objects in bulk and watches bindings (``kube``), the scheduler's metrics and each
component's CPU time (``metrics``), up/down and case runs (``lifecycle``) and the throughput
workloads (``workloads`` for drakit's own, ``schedperf`` for upstream scheduler_perf's shape)."""
