"""Changing a project's files: confined file operations, the plan of a run, merges, the manifest."""
