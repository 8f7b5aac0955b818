"""Developer workspace read models."""
