"""Generated gRPC stubs for the kubelet plugin APIs. Do not edit.

Made by ``python -m drakit.fake_driver.protos.regenerate`` from ``fake_driver/protos/*.proto``.
"""
