"""The study: config and site loaded and checked, run identities, the plan, verl's arguments, the memory
budget, the model's shape, the published reference and the image's identity. Nothing here writes a file
or starts a process. May import measured and base only (docs/architecture.md)."""
