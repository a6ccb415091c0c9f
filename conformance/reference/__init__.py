"""The mini control plane of the reference backend."""
