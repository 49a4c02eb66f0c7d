"""The project's definitions: configuration, roadmap, gate files, operations, implementations, targets."""
