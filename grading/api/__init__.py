"""The HTTP API for pipelines: endpoints, API keys, the JSON reader with its limits, and health."""
