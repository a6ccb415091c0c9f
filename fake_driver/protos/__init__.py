"""The .proto sources of the kubelet plugin APIs and the script that regenerates their stubs."""
