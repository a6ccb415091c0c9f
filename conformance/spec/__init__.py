"""The parsed case and what it needs of a target: plain data shared by the backends and the runner."""

from .case import Case
from .needs import Need

__all__ = ["Case", "Need"]
