"""What a study publishes: the report and the bundle."""
