"""The package version, in a module that imports nothing (the verifier reads it on bare GPU machines)."""

__version__ = "0.1.0"
