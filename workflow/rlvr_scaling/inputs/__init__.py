"""What the runs consume: datasets in verl's format, rewards, the model, the engine image and the inputs
lock. May import study, measured and base (docs/architecture.md)."""
