"""The programs uploaded to GPU hosts and run there with the host's python: the eval harness and the cache builder. They import nothing else of ours."""
