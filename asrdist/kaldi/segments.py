"""Which segments Kaldi's extract-segments cuts, and the samples it cuts them at.

src/featbin/extract-segments.cc (steps/make_mfcc.sh, make_fbank.sh) skips a segment with a
warning, instead of stopping, when:

- its line is invalid: start < 0, an end <= 0 other than -1, or start >= end (:108-113);
- its start is past the end of the recording (:138);
- its end is more than ``--max-overshoot`` (0.5 s) past the end (:146); an end less far past
  it is clipped to it, and -1 means the end (:154);
- it is shorter than ``--min-segment-length`` (0.1 s) after that (:157).

The times are doubles, the file length and both thresholds C floats (BaseFloat), promoted to
double where compared, as there. The sample range rounds (``static_cast<int32>(t * rate +
0.5f)``, :181-182). Utterances it skips have no features, and utils/fix_data_dir.sh then drops
them from the data dir.
"""

from __future__ import annotations

import numpy as np

MIN_SEGMENT_LENGTH = 0.1
MAX_OVERSHOOT = 0.5

# why a segment is skipped, as extract-segments' warnings say it
INVALID = "empty or invalid"
START_PAST_END = "starts past the end of its recording"
END_TOO_FAR = f"ends more than {MAX_OVERSHOOT} s past the end of its recording"
TOO_SHORT = f"shorter than {MIN_SEGMENT_LENGTH} s"


def segment_samples(start: float, end: float, num_samples: int, rate: float
                    ) -> tuple[int, int] | str:
    """(first sample, end sample) that extract-segments cuts from a recording of
    ``num_samples`` at ``rate``, or why it skips the segment (one of the reasons above)."""
    if start < 0 or (end != -1.0 and end <= 0) or (start >= end and end > 0):
        return INVALID
    length = float(np.float32(num_samples) / np.float32(rate))
    if start > length:
        return START_PAST_END
    if end > float(np.float32(length) + np.float32(MAX_OVERSHOOT)):
        return END_TOO_FAR
    if end < 0 or end > length:
        end = length
    if end - start < float(np.float32(MIN_SEGMENT_LENGTH)):
        return TOO_SHORT
    rate64 = float(np.float32(rate))
    first, last = int(start * rate64 + 0.5), int(end * rate64 + 0.5)
    return first, min(last, num_samples)


def extractable(start: float, end: float, num_samples: int, rate: float) -> bool:
    """Whether extract-segments cuts the segment (segment_samples gives samples)."""
    return isinstance(segment_samples(start, end, num_samples, rate), tuple)
