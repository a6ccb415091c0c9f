"""Helpers of ``bench_grpc.py``."""
