"""Conversations: taking them in (the API, importers and OTLP all write through ingest) and grading them."""
