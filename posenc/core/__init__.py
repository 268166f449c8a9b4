"""The bottom layer: errors, atomic file writes, and the small helpers every other layer shares."""
