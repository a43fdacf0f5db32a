"""Slurm integration: the round-based controller (`policyopt slurm`) and a local test cluster."""
