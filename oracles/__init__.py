"""Independent oracles: a different derivation of the same truth (stdlib, torch, a C compiler); never imports impl or gates."""
