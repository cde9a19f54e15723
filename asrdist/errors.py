"""One error type for bad input, so every CLI prints one clear line and exits non-zero."""

from __future__ import annotations


class AsrdistError(Exception):
    """Bad input or a failed precondition; the message names the file, utterance or option.

    Library code raises it and knows nothing of click; the CLIs (:func:`asrdist.cli.command`)
    print it as ``Error: <message>`` on one line and exit 1.
    """

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


def first_line(exc: BaseException, limit: int = 300) -> str:
    """An exception's first line, capped (a gloo or yaml error's full text can be pages long);
    its type name when it has no text."""
    text = str(exc).strip()
    return text.splitlines()[0][:limit] if text else type(exc).__name__
