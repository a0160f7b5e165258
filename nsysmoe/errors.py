"""The one exception root: the CLI turns it into a one-line message and a non-zero exit."""


class NsysmoeError(Exception):
    """A problem with the user's input that they can act on (message says what and what to do)."""


class UsageError(NsysmoeError):
    """Options that contradict each other; the CLI shows it with its usage line."""
