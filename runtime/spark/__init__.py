"""dslc package."""
