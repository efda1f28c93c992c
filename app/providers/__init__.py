"""Adapters to the outside world the core names as protocols: model providers and tokenizers."""
