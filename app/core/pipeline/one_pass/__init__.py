"""Stages 1–4 of the pipeline as one walk over the Conversation (spec §2, §3.1): the fast path
``prepare`` takes. The whole-list stage functions beside it are its oracle."""
