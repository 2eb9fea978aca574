"""Handing work on: tasks sent by name after commit (enqueue), the org's webhook signing secret, and the
evaluation records exported as OTLP logs. Below the record, so the code that decides to send never imports what
runs the task."""
