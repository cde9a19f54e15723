"""The embedded mini corpus: grammar sentences spoken by espeak-ng, a dict dir from espeak
phonemes, Kaldi data dirs and lhotse manifests."""
