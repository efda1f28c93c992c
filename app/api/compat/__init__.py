"""Codecs of the compatible endpoints: each provider protocol's request and answer shapes."""
