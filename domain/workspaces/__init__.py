"""Developer workspaces: the employee-scoped workspace lease and its lifecycle."""
