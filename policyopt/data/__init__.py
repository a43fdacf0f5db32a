"""Loaders for measured throughput data (Gavel's files) and trace-like inputs."""
from .gavel import GavelThroughputs, find_gavel_dir, load_gavel

__all__ = ["GavelThroughputs", "find_gavel_dir", "load_gavel"]
