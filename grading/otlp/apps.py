from django.apps import AppConfig


class OtlpConfig(AppConfig):
    """Its own app (label `otlp`) so its tables and migrations stand apart from the domain core's."""

    name = "grading.otlp"
    label = "otlp"
    default_auto_field = "django.db.models.BigAutoField"
