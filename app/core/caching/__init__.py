"""Prompt caching (spec §10): the request's prefix record (what is byte-identical to the previous
request) and the cache breakpoints a request asks the provider for. Nothing here is a cache."""
