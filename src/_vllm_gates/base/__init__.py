"""The ground floor: the engine's errors and their places, line-aware YAML and TOML definition files."""
