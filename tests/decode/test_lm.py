"""The n-gram estimator writes a valid ARPA model whose distributions sum to one; perplexity
skips OOV words and restarts the context after them."""

from __future__ import annotations

import kaldi_hmm_gmm  # noqa: F401  (before kaldilm, or the process hangs)
import kaldilm
import pytest

from asrdist.decode.lm import BOS, EOS, NgramLM, perplexity
from asrdist.errors import AsrdistError

SENTENCES = [s.split() for s in ["the cat sat", "the dog sat", "a cat ran", "the cat ran away",
                                 "a dog", "the the cat"]]
VOCAB = ["the", "cat", "dog", "sat", "ran", "away", "a", "zebra"]


@pytest.mark.parametrize("order", [1, 2, 3, 4])
def test_every_history_distribution_sums_to_one(order):
    lm = NgramLM(SENTENCES, VOCAB, order)
    histories = {()} | {g for n in range(1, order) for g in lm.prob[n] if g[-1] != EOS}
    histories |= {("zebra",), ("zebra", "cat")}  # unseen histories back off
    for h in histories:
        total = sum(10 ** lm.logprob(w, h) for w in lm.vocab)
        assert total == pytest.approx(1.0, abs=1e-6), h


def test_unseen_vocabulary_word_gets_probability():
    lm = NgramLM(SENTENCES, VOCAB, 3)
    assert -10 < lm.logprob("zebra", ("the", "cat")) < lm.logprob("sat", ("the", "cat"))


def test_arpa_file_is_valid(tmp_path):
    lm = NgramLM(SENTENCES, VOCAB, 3)
    lm.write_arpa(tmp_path / "lm.arpa")
    text = (tmp_path / "lm.arpa").read_text()
    sections = text.split("\\")
    counts = [int(line.split("=")[1]) for line in text.splitlines() if line.startswith("ngram ")]
    for n, count in enumerate(counts, 1):
        body = text.split(f"\\{n}-grams:\n")[1].split("\n\n")[0].strip().splitlines()
        assert len(body) == count
        assert all(len(line.split("\t")[1].split()) == n for line in body)
    assert sections[-2] == "end"
    assert f"-99.0000000\t{BOS}\t" in text
    words = ["<eps>", *VOCAB, "#0", BOS, EOS]
    (tmp_path / "words.txt").write_text("".join(f"{w} {i}\n" for i, w in enumerate(words)))
    fst_text = kaldilm.arpa2fst(str(tmp_path / "lm.arpa"), disambig_symbol="#0",
                                read_symbol_table=str(tmp_path / "words.txt"))
    assert fst_text.strip()


def test_no_training_text_is_refused():
    with pytest.raises(AsrdistError, match="no training text"):
        NgramLM([[]], VOCAB, 3)


def test_perplexity_skips_an_oov_and_restarts_after_it():
    lm = NgramLM(SENTENCES, VOCAB, 3)
    result = perplexity(lm, [["the", "martian", "cat"], ["a", "dog"]])
    logprobs = [lm.logprob("the", [BOS]), lm.logprob("cat", [BOS]),  # context restarts
                lm.logprob(EOS, [BOS, "cat"]), lm.logprob("a", [BOS]),
                lm.logprob("dog", [BOS, "a"]), lm.logprob(EOS, [BOS, "a", "dog"])]
    assert (result.sentences, result.words, result.oovs) == (2, 5, 1)
    assert result.ppl == pytest.approx(10 ** (-sum(logprobs) / len(logprobs)))


def test_a_higher_order_predicts_its_own_training_text_better():
    ppl = [perplexity(NgramLM(SENTENCES, VOCAB, n), SENTENCES).ppl for n in (1, 2, 3)]
    assert ppl[0] > ppl[1] > ppl[2] > 1.0
