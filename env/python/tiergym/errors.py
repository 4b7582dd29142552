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


class UnknownConfigKey(ServerError, TypeError):
    """The server knows no configuration key of this name: a ServerError (INVALID_ARGUMENT,
    field "config.KEY") that is also the TypeError Python raises for an unexpected keyword
    argument, which is what libraries that probe an environment's constructor with extra
    arguments catch (TorchRL's GymEnv retries without `frameskip`, SB3's make_vec_env
    without `render_mode`)."""

    def __init__(self, code, field=None, message=None):
        text = None
        if isinstance(code, str) and field is None and message is None:
            # Re-raised with a longer text (gymnasium.make raises type(e)(f"{e} was ...")).
            text = code
            code, message = "INVALID_ARGUMENT", text
        super().__init__(code, field, message)
        key = (self.field or "").partition(".")[2]
        self.args = (text or f"got an unexpected keyword argument {key!r}: {self.message}",)

    def __reduce__(self):
        if self.field is None:
            return (type(self), (self.args[0],))
        return super().__reduce__()


class ServerUnavailable(TierGymError, ConnectionError):
    """No reply: the server is not running, has died, or did not answer in time."""


class ProtocolError(TierGymError):
    """A reply that does not follow the protocol (not msgpack, not a map, not UTF-8): the
    peer is not a tiergym server of this protocol version, or is broken."""


class BinaryNotFound(TierGymError, FileNotFoundError):
    """The `tiergym` binary needed to start a private server was not found."""


class EpisodeInterrupted(ServerUnavailable):
    """The connection to the server was lost (the server died, was restarted, or its node
    went away) and, as the client was told to (reconnect=...), made again: the sessions
    exist again on the server now there, with the same configurations, but their episodes
    were cut. `reason` says what happened. The environments turn it into a truncated step
    whose info says why (info["interrupted"]); only code that calls a Connection itself
    meets it."""

    def __init__(self, reason):
        super().__init__(f"episode interrupted: {reason}")
        self.reason = reason

    def __reduce__(self):
        return (type(self), (self.reason,))


class NotAuthorized(TierGymError, PermissionError):
    """The server refused this client: a CURVE server whose --curve-clients does not list
    this client's key (or CURVE on one side only)."""
