"""Thin click wrappers over the library, one module per console script."""
