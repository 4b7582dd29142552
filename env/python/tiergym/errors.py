"""Exceptions raised by the tiergym client."""


class TierGymError(Exception):
    """Base class of every tiergym client error."""


class ServerError(TierGymError):
    """The server refused a request. `code` is an absl status name (INVALID_ARGUMENT,
    NOT_FOUND, FAILED_PRECONDITION, RESOURCE_EXHAUSTED, ...), `field` the request field at
    fault ("action[3]"), `message` the server's explanation (it starts with the field)."""

    def __init__(self, code, field=None, message=None):
        if isinstance(code, ServerError):  # Gymnasium's AsyncVectorEnv re-raises type(e)(e)
            code, field, message = code.code, code.field, code.message
        super().__init__(f"{code}: {message}")
        self.code = code
        self.field = field
        self.message = message

    def __reduce__(self):  # pickled across processes (AsyncVectorEnv's workers, Ray)
        return (type(self), (self.code, self.field, self.message))


class ServerUnavailable(TierGymError, ConnectionError):
    """No reply: the server is not running, has died, or did not answer in time."""


class ProtocolError(TierGymError):
    """A reply that does not follow the protocol (not msgpack, not a map, not UTF-8): the
    peer is not a tiergym server of this protocol version, or is broken."""


class BinaryNotFound(TierGymError, FileNotFoundError):
    """The `tiergym` binary needed to start a private server was not found."""
