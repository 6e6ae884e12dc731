"""What the runs consume: datasets in verl's format, the model, and the engine image."""
