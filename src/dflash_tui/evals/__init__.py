"""Evaluation: the harness shipped to GPU hosts, and (console side) jobs, results and estimates."""
