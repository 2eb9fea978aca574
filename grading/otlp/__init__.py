"""OpenTelemetry in and out (docs/opentelemetry.md).

In: an OTLP/HTTP trace receiver (`views`, mounted at /api/v1/otlp/v1/traces) decodes export requests (`wire`),
reads the GenAI semantic conventions off the spans (`genai`) and maps each model call onto the conversation
tree (`receiver`), through the same write path as the JSON API, so the evidence contract is the same.

Out: `gen_ai.evaluation.result` log records for every review and operator decision, sent by a Celery task after
commit to a configured OTLP/HTTP logs endpoint (grading/delivery/evaluations.py).
"""
