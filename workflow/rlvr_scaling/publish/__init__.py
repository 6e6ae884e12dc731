"""What a study publishes and how it is checked: the report, the bundle, verify, signing, comparing two
studies and the study history. May import every stage below it (docs/architecture.md)."""
