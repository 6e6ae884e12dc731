"""rlvr-scaling: a workflow-managed reproducibility pipeline for RLVR scaling studies."""

__version__ = "0.1.0"
