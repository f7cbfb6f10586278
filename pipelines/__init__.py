"""Pipelines of repo-analytics and the `repo-analytics` command that fronts them."""
