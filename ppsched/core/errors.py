"""User-facing errors: the CLI prints their message on one line and exits with code 2."""


class UserError(Exception):
    """Bad input from the user (flag, file, environment variable).

    The message names the bad value and what was expected.
    """


def require(condition: bool, message: str) -> None:
    """Raise UserError(message) unless condition holds."""
    if not condition:
        raise UserError(message)
