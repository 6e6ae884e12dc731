"""Whether the study reproduced: the verdict against the published reference (reproduction) and how
often the study's intervals hold the true value (coverage). May import every analysis layer and the
layers below (docs/architecture.md)."""
