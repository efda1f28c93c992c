"""Request and response schemas (pydantic); they convert to core types at the edge."""
