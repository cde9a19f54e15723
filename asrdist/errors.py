"""One error type for bad input, so every CLI prints one clear line and exits non-zero."""

from __future__ import annotations

import click


class AsrdistError(click.ClickException):
    """Bad input or a failed precondition; the message names the file, utterance or option.

    Raised from library code; click prints ``Error: <message>`` on one line and exits 1.
    """

    exit_code = 1
