"""Toy known-bad implementations."""


def drops_factor_two(block_size: int, heads: int, head_size: int, dtype_bytes: int) -> int:
    return block_size * heads * head_size * dtype_bytes


def wrong_only_for_big_heads(block_size: int, heads: int, head_size: int, dtype_bytes: int) -> int:
    return 2 * block_size * heads * head_size * dtype_bytes + (1 if heads > 3 else 0)


def accepts_negative(block_size: int, heads: int, head_size: int, dtype_bytes: int) -> int:
    return 2 * block_size * heads * head_size * dtype_bytes
