"""The ways in: the gates command and its commands, the pytest plugin, processes started by module name."""
