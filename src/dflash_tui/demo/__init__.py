"""The embedded demo cluster: SSH servers, a synthetic trainer and a matching hosts.toml."""
