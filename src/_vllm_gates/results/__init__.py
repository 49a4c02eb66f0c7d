"""Results: an item's outcome, verdicts per gate, milestone and row, and the reports that render them."""
