"""HTTP layer: routers, request/response schemas, dependencies and the one error handler."""
