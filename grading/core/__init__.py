"""The ground everything stands on: the evidence contract (active path, fingerprints) and a message as text, check
names and verdicts, ISO weeks, the payloads pipelines send with their checks of names and times, untrusted text in
prompts, JSON bodies read within limits, CSV cells safe in a spreadsheet, and the one guarded HTTP client for
user-given addresses. No database and no model: it imports nothing else of grading."""
