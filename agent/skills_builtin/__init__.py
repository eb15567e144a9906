"""Built-in skills (Markdown with front matter), loaded by agent.skills."""
