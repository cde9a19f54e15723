"""Keeping the network's pseudo log-likelihoods so that a decoding sweep never re-runs it.

What is kept is the acoustic side: ``log p(pdf | x) - log p(pdf)`` per frame, in a Kaldi
ark/scp (what ``nnet3-compute`` writes), so ``asrdist-decode --loglikes SCP`` decodes again (another
graph, beam or model comparison) without the network. At float32 those are 4 bytes x pdfs x
frames: 3.6 MB a second of speech at 9 k pdfs, tens of GB for eval2000. So they are kept as
Kaldi compressed matrices by default (``copy-feats --compress``'s format, read by every Kaldi
tool and by kaldiio): :data:`COMPRESSION` says what each choice costs.
"""

from __future__ import annotations

import logging
import os
import shutil
from collections.abc import Iterator
from dataclasses import asdict
from pathlib import Path

import kaldiio
import numpy as np

from asrdist.decode.acoustic import AS_TRAINED, Chunking, NnetScorer, list_utterances
from asrdist.errors import AsrdistError
from asrdist.fsutil import atomic_path, naming_full_disk, write_atomically
from asrdist.jobs import LOCAL, Runner, split
from asrdist.kaldi.data_dir import read_table
from asrdist.stage import Skipped, check_done

STAGE = "loglikes"
LOG_DIR = ".log"  # under OUT: hidden, so asrdist-decode's fingerprint of OUT skips the job logs
_COPY_BLOCK = 1 << 24  # bytes copied at a time when the parts are joined
OUTPUTS = ("loglikes.ark", "loglikes.scp", "num_pdfs")
# --compress: Kaldi's CompressionMethod (matrix/compressed-matrix.h) and what it keeps.
# 2byte (kTwoByteAuto): 16 bits a value over the matrix's range, so an error of at most
# range / 131070 (about 1e-3 nats for scores spanning 70); 1byte (kSpeechFeature): 8 bits a
# value on a per-pdf piecewise-linear grid through its quartiles, 4x smaller, errors up to
# about 1 % of a pdf's range; none: float32, exact.
COMPRESSION = {"2byte": 3, "1byte": 2, "none": None}
log = logging.getLogger(__name__)


def compute_loglikes(final_pt: str | os.PathLike, data_dir: str | os.PathLike,
                     out_dir: str | os.PathLike, chunking: Chunking = AS_TRAINED, nj: int = 1,
                     runner: Runner = LOCAL, compress: str = "2byte",
                     device: str = "cpu") -> Path | Skipped:
    """Write ``OUT/loglikes.{ark,scp}`` and ``OUT/num_pdfs``; Skipped when done already.
    ``compress``: a key of :data:`COMPRESSION`; ``device``: where each job runs the network
    (``cuda``: the job's first visible GPU, as a grid job given one sees it).

    Only when the work is to be done (a skipped run writes nothing) are the utterances split
    into ``nj`` contiguous parts, run by ``runner`` (a cluster job logging to ``OUT/.log/``:
    :data:`LOG_DIR`); each job writes its part beside the output and the parts are joined, in
    order, into the ark and scp that one job would have written, byte for byte. The network is
    checked against the data dir here first, before any job starts."""
    if nj < 1:
        raise AsrdistError(f"--nj {nj}: must be at least 1")
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    remove_temp_files(out)
    if compress not in COMPRESSION:
        raise AsrdistError(f"--compress {compress}: choose one of {', '.join(COMPRESSION)}")
    check = check_done(out, STAGE, {**asdict(chunking), "compress": compress},
                       [final_pt, data_dir])
    if check.done:
        return check.skipped()
    num_pdfs = NnetScorer(final_pt, data_dir, chunking, device).num_pdfs
    parts = split(list_utterances(data_dir), nj)
    ark = out.resolve() / "loglikes.ark"  # absolute for the scp, and never a link's target
    threads = 1 if len(parts) > 1 else 0  # jobs side by side: one thread each, as decoding's
    try:
        runner.map(STAGE, score_part, [(str(final_pt), str(data_dir), chunking, utts, str(ark),
                                        job, threads, compress, device)
                                       for job, utts in enumerate(parts)])
        with naming_full_disk(ark, "the scores"):
            _join([_part_paths(ark, job) for job in range(len(parts))], ark,
                  out / "loglikes.scp")
    finally:
        for job in range(len(parts)):
            for path in _part_paths(ark, job):
                path.unlink(missing_ok=True)
    write_atomically(out / "num_pdfs", lambda f: f.write(f"{num_pdfs}\n".encode()),
                     "pdf count")
    check.mark_done(["loglikes.scp"])
    return out


def score_part(final_pt: str, data_dir: str, chunking: Chunking, utts: list[str], ark: str,
               job: int, threads: int, compress: str = "2byte", device: str = "cpu") -> None:
    """One job: the scores of ``utts`` into job ``job``'s part of ``ark`` (``threads``: torch's
    threads, 0 leaving its default)."""
    scorer = NnetScorer(final_pt, data_dir, chunking, device)
    if threads:
        scorer.torch.set_num_threads(threads)
    part_ark, part_scp = _part_paths(Path(ark), job)
    with naming_full_disk(Path(ark), "the scores"), \
            kaldiio.WriteHelper(f"ark,scp:{part_ark},{part_scp}",
                                compression_method=COMPRESSION[compress]) as writer:
        for utt, scores in scorer.scores(utts):
            writer(utt, scores)


def _part_paths(ark: Path, job: int) -> tuple[Path, Path]:
    """Job ``job``'s (0-based) part ark and scp: hidden temporary files beside ``ark``, which
    :func:`remove_temp_files` removes when a killed run left them."""
    return (ark.with_name(f".loglikes.ark.part{job + 1}.tmp"),
            ark.with_name(f".loglikes.scp.part{job + 1}.tmp"))


def _join(parts: list[tuple[Path, Path]], ark: Path, scp: Path) -> None:
    """The part arks, in order, into ``ark`` and their scps, offsets moved and naming ``ark``,
    into ``scp``; both atomically. The first part is renamed, the others appended to it and
    removed one by one."""
    lines: list[str] = []
    start = 0
    for part_ark, part_scp in parts:
        for line in part_scp.read_text().splitlines():
            utt, _, where = line.partition(" ")
            lines.append(f"{utt} {ark}:{start + int(where.rpartition(':')[2])}\n")
        start += part_ark.stat().st_size
    with atomic_path(ark) as tmp_ark, atomic_path(scp) as tmp_scp:
        os.replace(parts[0][0], tmp_ark)
        with open(tmp_ark, "ab") as joined:
            for part_ark, _ in parts[1:]:
                with open(part_ark, "rb") as f:
                    shutil.copyfileobj(f, joined, _COPY_BLOCK)
                part_ark.unlink()  # the disk holds the scores about once, not twice
        tmp_scp.write_text("".join(lines))


def remove_temp_files(out: Path) -> None:
    """Remove the hidden temporary files (``.loglikes.ark.*.tmp``: as large as the scores) that
    a killed run left in ``out``, as the trainer does for checkpoints; only called before this
    run writes anything there."""
    for name in OUTPUTS:
        for path in out.glob(f".{name}.*.tmp"):
            log.info("%s: removing the temporary file a killed run left", path)
            path.unlink(missing_ok=True)


class LoglikeScorer:
    """Saved scores, served as the decoder's acoustic scorer."""

    def __init__(self, scp: str | os.PathLike):
        self.path = Path(scp)
        if not self.path.is_file():
            raise AsrdistError(f"--loglikes {scp}: no such file (run asrdist-compute-loglikes)")
        # an id twice is refused here (kaldiio's load_scp kept the last entry's)
        self.table = read_table(self.path, require_value=True)
        num_pdfs = self.path.parent / "num_pdfs"
        if not num_pdfs.is_file():
            raise AsrdistError(f"{num_pdfs}: missing beside --loglikes {scp}")
        self.num_pdfs = int(num_pdfs.read_text().split()[0])

    def scores(self, utts: list[str]) -> Iterator[tuple[str, np.ndarray]]:
        for utt in utts:
            if utt not in self.table:
                raise AsrdistError(f"--loglikes {self.path}: no scores for utterance {utt}")
            yield utt, self._load(utt)

    def _load(self, utt: str) -> np.ndarray:
        """``utt``'s scores; an ark cut short or a bad offset is one line naming both."""
        where = self.table[utt]
        try:
            return np.asarray(kaldiio.load_mat(where), dtype=np.float32)
        except Exception as e:  # noqa: BLE001 - kaldiio raises many types for a bad entry
            raise AsrdistError(f"--loglikes {self.path}: utterance {utt}: cannot read its "
                               f"scores from {where} ({type(e).__name__}: {str(e)[:120]})"
                               ) from e
