"""Limits the service enforces: JSON depth and size (spec §11.4), what one stored message may
hold, and the token buckets of per-tenant rate limits."""
