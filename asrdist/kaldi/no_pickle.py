"""kaldiio reads an ark entry whose data starts with ``PKL`` with ``pickle.load``: a crafted
``feats.ark`` (or pdf, cmvn, loglikes ark) named by an scp would run its code as soon as
asrdist read the entry. asrdist's arks hold Kaldi matrices and vectors only, so
:func:`refuse_pickled_entries` gives kaldiio a ``pickle`` whose ``load`` refuses, in one line
naming the ark and the offset. :mod:`asrdist` calls it on import, before any ark is read.
"""

from __future__ import annotations

import pickle
from types import SimpleNamespace
from typing import IO, NoReturn

import kaldiio.matio

from asrdist.errors import AsrdistError


def _refuse(fd: IO[bytes], *args: object, **kwargs: object) -> NoReturn:
    where = getattr(fd, "name", None)
    at = f"{where}:{fd.tell() - 3}" if isinstance(where, str) else "an ark entry"
    raise AsrdistError(f"{at}: refused: the entry is a Python pickle (kaldiio's PKL), not a "
                       "Kaldi matrix or vector, and loading it could run code")


def refuse_pickled_entries() -> None:
    """Make kaldiio refuse every pickled ark entry; writing pickles is left as it was."""
    kaldiio.matio.pickle = SimpleNamespace(load=_refuse, dump=pickle.dump)
