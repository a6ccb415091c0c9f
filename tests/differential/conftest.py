from tests.differential.oracle_fixture import admission_oracle, oracle  # noqa: F401
