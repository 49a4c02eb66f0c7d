"""Mutation testing (gates mutate): mutants, their builds, the hook, the report; only the front ends import it."""
