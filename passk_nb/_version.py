"""The package version, recorded in every trial row as ``harness_version``."""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("passk-nb")
except PackageNotFoundError:  # running from a source tree that was not installed
    __version__ = "0.0.0+source"
