"""asrdist: distributed training of hybrid acoustic models in Kaldi-recipe style."""

__version__ = "0.1.0"
