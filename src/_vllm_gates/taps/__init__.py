"""Where an implementation diverges from a reference (gates diverge): taps recorded, localized, shrunk, reported."""
