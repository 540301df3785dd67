"""DirectML operators: descriptors, validation, shape inference, NumPy and CuPy backends."""
