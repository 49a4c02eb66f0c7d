"""Toy oracle: count the bytes of an explicit K and V page, element by element (EX-1.1)."""


def counted_page_bytes(block_size: int, heads: int, head_size: int, dtype_bytes: int) -> int:
    if min(block_size, heads, head_size, dtype_bytes) < 0:
        raise ValueError("negative size")
    page = [[[[0] * dtype_bytes for _ in range(head_size)] for _ in range(heads)] for _ in range(block_size)]
    one = sum(len(elem) for token in page for head in token for elem in head)
    return one + one
