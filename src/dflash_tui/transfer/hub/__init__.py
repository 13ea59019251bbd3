"""Fetching a checkpoint from the Hugging Face Hub onto a host (the script runs there)."""
