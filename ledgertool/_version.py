"""The package version, in a module of its own so that modules needing it (the native binding's
build check, the conformance kit's `generated_by`) do not import the package's lazy public API."""

__version__ = "0.1.0"
