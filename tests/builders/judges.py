"""Named judges (settings.JUDGES) pointed at loopback fake servers, configured as JUDGES_FILE would configure them."""

from tests.fakes.openai_server import FakeLLM


def judge_config(server: FakeLLM, *, model: str = "judge-test", **changes) -> dict:
    """A judge's entry in settings.JUDGES, every key as reviewer/env.py `env_judges` gives it, answering at `server`.
    No retries: a test that scripts an error sees it at once, with no sleeping."""
    return {
        "base_url": server.base_url,
        "model": model,
        "api_key": "test-key",
        "timeout_seconds": 5.0,
        "max_retries": 0,
        "context_tokens": 0,
        "max_output_tokens": 1_024,
        "price_input_per_million": None,
        "price_output_per_million": None,
    } | changes


def configure_judges(settings, **judges: dict) -> None:
    """Add (or replace) named judges in pytest-django's `settings` for the test; `default=` replaces the JUDGE_* one."""
    settings.JUDGES = settings.JUDGES | judges
