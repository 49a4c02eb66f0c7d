"""Toy strategy: small page geometries."""
from hypothesis import strategies as st


def geometries():
    return st.fixed_dictionaries({"block_size": st.integers(0, 4), "heads": st.integers(0, 5),
                                  "head_size": st.integers(0, 4), "dtype_bytes": st.sampled_from([1, 2, 4])})
