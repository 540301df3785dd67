"""Code from other projects, each folder under its own licence (a LICENSE file beside it)."""
