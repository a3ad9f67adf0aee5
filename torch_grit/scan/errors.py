"""The one error a reader raises: the file cannot be parsed, and why."""


class Unparseable(Exception):
    """A file this scanner cannot read as safetensors or GGUF.

    ``reason`` is a short stable code (``header_truncated``, ``bad_magic`` ...),
    the message says what was expected and what was found.
    """

    def __init__(self, reason, message):
        super().__init__("%s: %s" % (reason, message))
        self.reason = reason
        self.detail = message
