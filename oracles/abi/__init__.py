"""C-compiler oracles for the C ABI (CAPI-2 to CAPI-9): the spec header compiled, measured and run."""
