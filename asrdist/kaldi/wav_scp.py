"""The values of a Kaldi ``wav.scp``: a file, or a shell pipe ending in ``|``, and how to read them.

Kaldi's Switchboard, eval2000 and Fisher data prep write pipes through sph2pipe
(egs/swbd/s5c/local/swbd1_data_prep.sh:111-114, eval2000_data_prep.sh:51-54,
egs/fisher_swbd/s5/local/fisher_data_prep.sh:164-165)::

    sw02001-A /opt/kaldi/tools/sph2pipe_v2.5/sph2pipe -f wav -p -c 1 /LDC/.../sw02001.sph |

and utils/perturb_data_dir_speed.sh:99-104 appends a sox stage to a pipe for each speed copy
(``... | sox -t wav - -t wav - speed 0.9 |``). asrdist's own data prep writes
``asrdist-sph2wav -c 1 [--speed F] FILE |``. Such a pipe says which SPHERE file, channel and
speed it gives (:class:`SphereChannel`), so asrdist can read it itself, decoding each file once
for both sides and every speed. It does so for asrdist-sph2wav always, and for sph2pipe (and
sox) only when a program of the pipe is not installed: with Kaldi's tools at hand the pipe runs
as Kaldi runs it, sox's resampler included. Any other pipe is run by the shell, and needs its
programs.
"""

from __future__ import annotations

import io
import os
import re
import shlex
import shutil
import struct
import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from typing import BinaryIO

import numpy as np
import soundfile

from asrdist.errors import AsrdistError

SPH2PIPE = "sph2pipe"
SPH2WAV = "asrdist-sph2wav"
# perturb_data_dir_speed.sh:102: " sox -t wav - -t wav - speed " factor " |"
SOX_SPEED = ("sox", "-t", "wav", "-", "-t", "wav", "-", "speed")
SPEED_WARNING = ("speed-perturbed audio (wav.scp's 'sox ... speed F' stages) is made by asrdist's "
                 "linear-interpolation resampler, not sox's: its samples differ slightly from "
                 "sox's (install sox and sph2pipe to run the pipes as Kaldi does)")
# what separates the commands of a pipe or a list (a shell's control operators)
_OPERATORS = {"|", "||", "&&", ";", "&", "(", ")", ";;", "|&"}
_REDIRECTIONS = {"<", ">", ">>", "<>", ">&", "<&", ">|"}
_ASSIGNMENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*=")
# RIFF and data chunk sizes of a wav written to a stream of unknown length, read to its end
# (Kaldi's feat/wave-reader.cc: "stream mode")
_STREAMED = {(0, 0), (0xFFFFFFFF, 0xFFFFFFFF)}
# the data size sox writes when it cannot seek back to fix the header ("Length in output .wav
# header will be wrong"): a stream too
SOX_STREAMED_DATA = 0x7FFFF000
# libsndfile's frame count of a stream that declares none (SF_COUNT_MAX)
_UNKNOWN_FRAMES = 2**63 - 1
INT16_SCALE = 32768.0  # full scale of the int16 samples Kaldi's features are computed on
# bytes read to find an MP3's first frame (after an ID3v2 tag, often a few KB of cover art
# and tags), and where in that frame a Xing/Info (after the side info) or VBRI tag sits
MP3_HEAD = 1 << 20
_FIRST_FRAME_TAGS = 64


@dataclass(frozen=True)
class WavFile:
    """A wav.scp value that names a file (wav, flac: what soundfile reads)."""

    path: str


@dataclass(frozen=True)
class SphereChannel:
    """One channel (1-based, sph2pipe's -c) of a SPHERE file, played ``speed`` times faster."""

    path: str
    channel: int = 1
    speed: float = 1.0


@dataclass(frozen=True)
class Pipe:
    """A wav.scp value ending in ``|``: a shell command that writes a wav to stdout.

    ``programs`` are the programs its commands run, as written (a name or a path); ``sphere``
    is what it writes when that is one channel of a SPHERE file (sph2pipe or asrdist-sph2wav,
    then any sox speed stages), else None; ``ours`` says its first program is asrdist-sph2wav.
    """

    command: str
    programs: tuple[str, ...]
    sphere: SphereChannel | None = None
    ours: bool = False


def parse_wav_value(value: str) -> WavFile | Pipe:
    """What a wav.scp value (the text after the recording id) is; only its syntax is read."""
    value = value.strip()
    if not value.endswith("|"):
        return WavFile(value)
    command = value[:-1].strip()
    try:
        lexer = shlex.shlex(command, posix=True, punctuation_chars=True)
        lexer.whitespace_split = True
        tokens = list(lexer)
    except ValueError as e:
        raise AsrdistError(f"wav.scp pipe {value!r} is not a shell command: {e}") from None
    commands: list[list[str]] = [[]]
    for token in tokens:
        if token in _OPERATORS:
            commands.append([])
        else:
            commands[-1].append(token)
    programs = tuple(p for p in map(_program, commands) if p)
    if not programs:
        raise AsrdistError(f"wav.scp pipe {value!r} runs no program")
    stages = commands if set(tokens) & _OPERATORS <= {"|"} else []
    return Pipe(command, programs, _sphere_channel(stages),
                os.path.basename(programs[0]) == SPH2WAV)


def _program(words: list[str]) -> str:
    """The program a simple command runs: its first word that is neither a variable
    assignment nor part of a redirection (``2>`` included)."""
    skip = False
    for i, word in enumerate(words):
        redirect_fd = word.isdigit() and i + 1 < len(words) and words[i + 1] in _REDIRECTIONS
        if skip:
            skip = False
        elif word in _REDIRECTIONS:
            skip = True
        elif not redirect_fd and not _ASSIGNMENT.match(word):
            return word
    return ""


def _sphere_channel(stages: list[list[str]]) -> SphereChannel | None:
    """The SPHERE channel and speed that a pipe of these stages writes, if it is one asrdist
    reads itself: sph2pipe or asrdist-sph2wav, then sox speed stages."""
    if not stages or not stages[0]:
        return None
    program, *args = stages[0]
    name = os.path.basename(program)
    if name == SPH2PIPE:
        found = _sph2pipe_args(args)
    elif name == SPH2WAV:
        found = _sph2wav_args(args)
    else:
        return None
    if found is None:
        return None
    path, channel, speed = found
    for stage in stages[1:]:
        if tuple(stage[:-1]) != SOX_SPEED:
            return None
        factor = _positive(stage[-1])
        if factor is None:
            return None
        speed *= factor
    return SphereChannel(path, channel, speed)


def _sph2pipe_args(args: list[str]) -> tuple[str, int, float] | None:
    """sph2pipe's ``-f wav -p -c N FILE`` (options in any order, -p and -c optional; no -c
    writes every channel, and Kaldi's compute-*-feats then take the first)."""
    files, channel, fmt, i = [], 1, None, 0
    while i < len(args):
        arg = args[i]
        if arg == "-p":
            i += 1
        elif arg in ("-f", "-c") and i + 1 < len(args):
            if arg == "-f":
                fmt = args[i + 1]
            elif not args[i + 1].isdigit() or int(args[i + 1]) < 1:
                return None
            else:
                channel = int(args[i + 1])
            i += 2
        elif arg.startswith("-"):
            return None  # -t/-s (a part of the file), -u/-a (companded output), -h: not ours
        else:
            files.append(arg)
            i += 1
    if fmt not in ("wav", "rif") or len(files) != 1:
        return None
    return files[0], channel, 1.0


def _sph2wav_args(args: list[str]) -> tuple[str, int, float] | None:
    """asrdist-sph2wav's ``[-c N] [--speed F] FILE`` (its click options)."""
    files, channel, speed, i = [], 1, 1.0, 0
    while i < len(args):
        name, eq, inline = args[i].partition("=")
        if name in ("-c", "--channel", "--speed"):
            if not eq:
                if i + 1 == len(args):
                    return None
                inline, i = args[i + 1], i + 1
            if name == "--speed":
                speed = _positive(inline)
                if speed is None:
                    return None
            elif not inline.isdigit() or int(inline) < 1:
                return None
            else:
                channel = int(inline)
        elif args[i].startswith("-"):
            return None
        else:
            files.append(args[i])
        i += 1
    return (files[0], channel, speed) if len(files) == 1 else None


def _positive(text: str) -> float | None:
    try:
        value = float(text)
    except ValueError:
        return None
    return value if value > 0 else None


Which = Callable[[str], str | None]


def missing_programs(pipe: Pipe, which: Which = shutil.which) -> list[str]:
    """The programs of ``pipe`` that are not executables (on PATH, or at the path given)."""
    return [p for p in pipe.programs if which(p) is None]


def audio_source(value: str, which: Which = shutil.which) -> WavFile | SphereChannel | Pipe:
    """How asrdist reads a wav.scp value: a file; a SPHERE channel read in-process (an
    asrdist-sph2wav pipe, or a sph2pipe one with a program missing); or a pipe for the shell.
    ``which`` finds a program (a caller reading a whole wav.scp passes a cached one: the
    same few programs recur in every line).

    Raises AsrdistError naming the missing program of any other pipe."""
    source = parse_wav_value(value)
    if isinstance(source, WavFile):
        return source
    missing = missing_programs(source, which)
    if source.sphere is not None and (source.ours or missing):
        return source.sphere
    if missing:
        raise AsrdistError(f"wav.scp pipe {value.strip()!r} needs {missing[0]!r}, which is "
                           "not installed (not an executable on PATH or at that path)")
    return source


def read_audio(source: WavFile | Pipe, unchecked: Callable[[str], None] | None = None
               ) -> tuple[np.ndarray, int]:
    """(samples of the first channel on the int16 scale, as float32; sample rate) of a file or
    of a pipe's output, as Kaldi's compute-*-feats read a wav.scp entry (channel 0 of a
    multi-channel wav).

    Any subtype soundfile reads comes out on the int16 scale that the features expect: 16-bit
    PCM as its values, float wav (sox's, librosa's: samples in [-1, 1]) times 32768, 24- and
    32-bit PCM scaled down to it, fractions kept. Reading them as int16 would truncate a float
    wav to near-silence.

    Audio with less data than its header declares (a truncated file, a pipe cut short: a wav's
    data chunk, an MP3's Xing/Info frame count), or a stream-mode wav ending inside a sample
    frame, is an error, as in Kaldi's wave reader: libsndfile would return what arrived without
    a word. Audio whose header declares no length
    to check against (an MP3 without a Xing/Info or VBRI frame) is passed to ``unchecked``
    with one line saying so, for the caller to warn naming the utterance."""
    what = source.command if isinstance(source, Pipe) else source.path
    try:
        if isinstance(source, Pipe):
            proc = subprocess.run(source.command, shell=True, capture_output=True, check=True)
            samples, rate, why = _decode(io.BytesIO(proc.stdout), what)
        else:
            with open(source.path, "rb") as f:
                samples, rate, why = _decode(f, what)
    except subprocess.CalledProcessError as e:
        err = e.stderr.decode(errors="replace").strip()
        raise AsrdistError(f"cannot read audio {what!r}: exit status "
                           f"{e.returncode}: {err}".replace("\n", " ")) from e
    except (OSError, RuntimeError, soundfile.LibsndfileError) as e:
        raise AsrdistError(f"cannot read audio {what!r}: {e}".replace("\n", " ")) from e
    if why is not None and unchecked is not None:
        unchecked(why)
    return samples[:, 0], rate


def _decode(audio: BinaryIO, what: str) -> tuple[np.ndarray, int, str | None]:
    """(samples x channels on the int16 scale, rate, why their length could not be checked or
    None) of the seekable audio file ``what``; less than its header declares is an error."""
    sizes = wav_data_sizes(audio)
    if sizes is not None and sizes[1] < sizes[0]:
        raise AsrdistError(f"audio {what!r} is truncated: its wav header declares {sizes[0]} "
                           f"bytes of data, {sizes[1]} were read")
    partial = partial_frame(audio)
    if partial is not None:
        raise AsrdistError(f"audio {what!r} is truncated: a stream-mode wav (no length "
                           f"declared) whose {partial[0]} bytes of data end inside a "
                           f"{partial[1]}-byte sample frame")
    audio.seek(0)
    with soundfile.SoundFile(audio) as f:
        declared, rate, mp3 = f.frames, f.samplerate, f.format == "MP3"
        if declared == _UNKNOWN_FRAMES:  # libsndfile fails part way (a FLAC piped by sox)
            raise AsrdistError(f"cannot read audio {what!r}: its {f.format} header declares "
                               "no length, which libsndfile cannot read to its end; decode it "
                               "to wav in the pipe (e.g. flac -c -d -s -)")
        samples = f.read(dtype="float32", always_2d=True)  # [-1, 1) for the integer subtypes
    samples *= INT16_SCALE
    why = None
    if mp3 and not mp3_declares_length(_head(audio)):
        why = (f"audio {what!r} is an MP3 declaring no length (no Xing/Info or VBRI frame): "
               f"{len(samples)} samples decoded, as many as libsndfile estimates from its size "
               "and first bitrate; a variable-bitrate or cut-short stream may have lost audio "
               "unseen")
    elif len(samples) < declared:
        raise AsrdistError(f"audio {what!r} is truncated: its header declares {declared} "
                           f"samples, {len(samples)} were decoded")
    return samples, rate, why


def _head(audio: BinaryIO) -> bytes:
    audio.seek(0)
    return audio.read(MP3_HEAD)


def mp3_declares_length(head: bytes) -> bool:
    """Whether the MP3 stream starting with ``head`` declares its length: its first frame
    (after an ID3v2 tag) is a Xing/Info or VBRI frame, which counts the stream's frames; a bare
    MP3 says nothing of how long it should be."""
    start = 0
    if head[:3] == b"ID3" and len(head) >= 10:
        size = sum((b & 0x7F) << (7 * (3 - i)) for i, b in enumerate(head[6:10]))  # syncsafe
        start = 10 + size + (10 if head[5] & 0x10 else 0)  # and a footer, when flagged
    first = head[start:start + _FIRST_FRAME_TAGS]
    return any(tag in first for tag in (b"Xing", b"Info", b"VBRI"))


def wav_data_sizes(audio: BinaryIO) -> tuple[int, int] | None:
    """(bytes of data the RIFF header declares, bytes after the header) of a seekable wav;
    None for another format, a header too short to say, or a stream-mode wav (sizes 0 or
    0xFFFFFFFF, or sox's 0x7FFFF000 data: read to its end)."""
    header = _wav_header(audio)
    if header is None or header.streamed:
        return None
    return header.data_size, header.after


def partial_frame(audio: BinaryIO) -> tuple[int, int] | None:
    """(bytes after the header, bytes of one sample frame) of a stream-mode wav whose data does
    not end on a whole frame (every channel's sample), else None: it declares no length, but a
    writer never ends mid-frame, so such a stream was cut short."""
    header = _wav_header(audio)
    if header is None or not header.streamed or not header.block_align:
        return None
    return (header.after, header.block_align) if header.after % header.block_align else None


@dataclass(frozen=True)
class _WavHeader:
    streamed: bool  # sizes of a stream of unknown length (_STREAMED, SOX_STREAMED_DATA)
    data_size: int  # bytes of data declared
    after: int  # bytes after the header
    block_align: int  # bytes of one sample frame (the fmt chunk's; 0 when there is none)


def _wav_header(audio: BinaryIO) -> _WavHeader | None:
    """The sizes a seekable wav's header gives, or None for another format or a header too
    short to say."""
    total = audio.seek(0, io.SEEK_END)
    audio.seek(0)
    head = audio.read(12)
    if len(head) < 12 or head[:4] not in (b"RIFF", b"RIFX") or head[8:] != b"WAVE":
        return None
    order = "<" if head[:4] == b"RIFF" else ">"
    riff_size = struct.unpack(order + "I", head[4:8])[0]
    block_align = 0
    while len(chunk := audio.read(8)) == 8:
        size = struct.unpack(order + "I", chunk[4:])[0]
        if chunk[:4] == b"data":
            streamed = (riff_size, size) in _STREAMED or size == SOX_STREAMED_DATA
            return _WavHeader(streamed, size, total - audio.tell(), block_align)
        if chunk[:4] == b"fmt " and size >= 14:
            block_align = struct.unpack(order + "H", audio.read(14)[12:])[0]
            size -= 14
        audio.seek(size + (size & 1), io.SEEK_CUR)  # chunks are padded to an even size
    return None
