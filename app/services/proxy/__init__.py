"""Drop-in compatible endpoints: a provider-shaped request continues a stored session."""
