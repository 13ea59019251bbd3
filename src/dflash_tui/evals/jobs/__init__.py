"""Running eval and cache-build jobs: lifecycle, GPU choice, placement, preflight, launch backends (ssh, Slurm) and installing the shipped programs."""
