"""The protocol between judge and workers: framing, plain data, tensors, what a builder receives."""
