"""Domain errors raised by selectors and services; the HTTP layer maps each to one status."""


class ArtifactsError(Exception):
    """Base class of the storage layer's expected failures."""


class NotFound(ArtifactsError):
    """The scope, artifact, revision or entry does not exist (or may not be seen)."""


class Conflict(ArtifactsError):
    """A write contradicts the current state: the head moved, or an entry exists / is gone."""


class InvalidInput(ArtifactsError):
    """A value cannot be stored; ``path`` names the offending field."""

    def __init__(self, message: str, *, path: str = "") -> None:
        super().__init__(message)
        self.path = path
        self.message = message
