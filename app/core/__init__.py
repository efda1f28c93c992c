"""The pure core: content model, prepare pipeline, budget, world state and compaction rules.

Standard library only (no fastapi, pydantic, sqlalchemy, httpx or tiktoken; a test walks the
imports). No I/O, no clock, no environment: everything the core needs is passed in.
"""
