"""Backends: the reference (in-process) and the cluster (a real API server) behind one small interface."""
