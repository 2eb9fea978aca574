"""What the writes refuse, for the API, the OTLP receiver and the commands to turn into a clear answer."""


class LimitExceeded(Exception):
    """A payload over a configured limit; `limit` names the setting."""

    def __init__(self, limit: str, value: int, message: str) -> None:
        super().__init__(message)
        self.limit = limit
        self.value = value


class FieldInvalid(Exception):
    """An input that cannot be taken as given: `field` names it, `message` says why, and the text says both
    (`field: message`), as an API's error or a command's line shows it. Nothing was written."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field
        self.message = message


class FieldRefused(Exception):
    """A change refused: `field` names what to correct and the text is the `message` alone, as a form shows it at
    that field. Nothing was written."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field
        self.message = message


class NotFound(Exception):
    """An id that does not exist in the caller's org."""


class ConversationNotFound(NotFound):
    pass
