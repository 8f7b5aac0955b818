"""Developer workspaces over HTTP: the dev_workspace launch provider and the usage meter."""
