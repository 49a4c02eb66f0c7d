"""Toy impl: bytes of one KV page by formula (EX-1.1, EX-1.2)."""


def page_bytes(block_size: int, heads: int, head_size: int, dtype_bytes: int) -> int:
    for name, value in (("block_size", block_size), ("heads", heads), ("head_size", head_size), ("dtype_bytes", dtype_bytes)):
        if value < 0:
            raise ValueError(f"{name} must be >= 0, got {value}")
    return 2 * block_size * heads * head_size * dtype_bytes
