from tests.differential.oracle_fixture import oracle  # noqa: F401
