"""Builders of test data, one module per thing built; test modules import them from here, never from each other."""
