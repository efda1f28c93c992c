"""The JSON the API answers with, written from the services' typed results.

A service returns dataclasses (``app.services``); the route hands them here and the answer goes
out through ``app.api.jsonresponse`` without a validation pass. Each function writes exactly the
shape its response schema (``app.api.schemas``) documents, in the schema's field order; the
contract tests (tests/contract, tests/api) hold them to it.
"""
