"""Conversations: taking them in (the API, importers and OTLP all write through ingest), reading their active path,
and grading them."""
