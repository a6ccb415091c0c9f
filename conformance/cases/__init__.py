"""Cases: loading, expanding and running *.case.yaml steps against a backend."""
