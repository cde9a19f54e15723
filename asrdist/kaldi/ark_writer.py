"""Writing a Kaldi ark and its scp in place, never through a symbolic link planted at either.

kaldiio's ``WriteHelper`` opens its files by name and follows a link there, so a planted
``feats.ark`` link would overwrite what it points to; here both are opened with
:func:`asrdist.fsutil.open_output` (``O_NOFOLLOW``) and the entries written by kaldiio, the
same bytes as ``WriteHelper("ark,scp:ARK,SCP")``.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterator

import kaldiio
import numpy as np

from asrdist.fsutil import open_output

Write = Callable[[str, np.ndarray], None]


@contextlib.contextmanager
def ark_writer(ark: str | os.PathLike, scp: str | os.PathLike,
               compression_method: int | None = None) -> Iterator[Write]:
    """Yield ``write(key, matrix)``, appending one entry to ``ark`` and its line to ``scp``
    (naming ``ark`` as given); a link at either is refused in one line naming it."""
    with open_output(ark, "wb") as fark, open_output(scp, "w", encoding="utf-8") as fscp:

        def write(key: str, matrix: np.ndarray) -> None:
            kaldiio.save_ark(fark, {key: matrix}, scp=fscp, compression_method=compression_method)

        yield write
