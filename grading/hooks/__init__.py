"""What leaves Tollgate after a write commits: webhooks to pipelines, evaluation records as OTLP logs, and the one
guarded HTTP client for user-given addresses."""
