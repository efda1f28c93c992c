"""Use cases: they compose core, storage and providers; routes call exactly one of them."""
