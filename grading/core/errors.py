"""What the writes refuse, for the API, the OTLP receiver and the commands to turn into a clear answer."""


class LimitExceeded(Exception):
    """A payload over a configured limit; `limit` names the setting."""

    def __init__(self, limit: str, value: int, message: str) -> None:
        super().__init__(message)
        self.limit = limit
        self.value = value


class NotFound(Exception):
    """An id that does not exist in the caller's org."""


class ConversationNotFound(NotFound):
    pass
