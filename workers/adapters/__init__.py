"""Adapters of the ports the domain owns (workspace provider, model proxy)."""
