"""asrdist: distributed training of hybrid acoustic models in Kaldi-recipe style."""

from asrdist.kaldi.no_pickle import refuse_pickled_entries

__version__ = "0.1.0"

refuse_pickled_entries()  # an ark is data: kaldiio would unpickle a crafted entry
