"""The one exception type that means "the user asked for something we cannot do": printed as one line, exit 2."""


class UserError(Exception):
    """Bad input or an unusable environment. The message is a single line naming the field or argument."""
