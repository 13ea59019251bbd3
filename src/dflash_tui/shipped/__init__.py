"""The programs uploaded to GPU hosts and run there with the host's python: the eval harness, the cache builder and the served bench. They import nothing else of ours."""
