"""The agent runtime: typed messages, providers, tools and the loop. Depends only on `config`."""
