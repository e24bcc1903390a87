"""The requirement registry: every requirement the suite decides, and those no client can observe, as data."""
