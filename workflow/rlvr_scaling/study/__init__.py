"""The study: config and site loaded and checked, run identities, the plan and its view, verl's arguments.
Nothing here writes a file or starts a process."""
