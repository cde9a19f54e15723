"""English sentences from a small hand-written grammar, for the espeak mini corpus.

No text corpus can be downloaded here, so sentences come from templates over word lists
(about a thousand word forms). Everything is drawn from a seeded ``numpy`` generator, so the
same seed always gives the same sentences; two streams with different ``stream`` numbers are
independent, which is how the corpus keeps train and test text apart (see
:func:`iter_unique_sentences`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass

import numpy as np

MIN_WORDS = 5
MAX_WORDS = 15

# Singular count nouns; plurals follow `_plural`. People and animals can act (be subjects of
# action verbs), things cannot, which keeps the sentences roughly sensible.
ANIMATE_NOUNS = """
teacher doctor farmer baker driver painter singer writer student neighbor lawyer nurse
pilot sailor soldier hunter fisherman waiter manager player captain king queen prince
princess friend brother sister mother father uncle cousin stranger visitor traveler
dog cat horse cow sheep goat rabbit mouse bird duck chicken eagle wolf bear fox lion tiger
monkey snake frog fish whale turtle donkey pig man woman child person
"""

THING_NOUNS = """
house garden kitchen window door table chair bed lamp clock mirror carpet shelf box basket
bottle cup plate spoon knife fork bowl kettle bucket ladder hammer rope candle blanket pillow
book letter paper pencil map picture photo newspaper magazine story song poem
car truck bus train boat ship bicycle wagon plane rocket
road bridge river lake mountain hill forest field valley island beach village city town
market church school library hospital station castle tower farm barn shop office factory
apple orange banana lemon potato tomato carrot onion cake bread cheese egg sandwich cookie
pie soup salad
coat hat shoe shirt jacket dress scarf glove boot umbrella
stone flower tree leaf seed cloud storm wind rainbow star moon planet fire
key ring coin wallet bag ticket gift prize secret plan problem question answer idea lesson
game party meeting journey holiday dinner breakfast lunch picnic foot tooth
"""

IRREGULAR_PLURALS = {
    "man": "men",
    "woman": "women",
    "child": "children",
    "person": "people",
    "mouse": "mice",
    "foot": "feet",
    "tooth": "teeth",
    "sheep": "sheep",
    "fish": "fish",
    "fisherman": "fishermen",
    "shelf": "shelves",
    "knife": "knives",
    "leaf": "leaves",
    "wolf": "wolves",
    "scarf": "scarves",
    "potato": "potatoes",
    "tomato": "tomatoes",
}

NAMES = """
john mary peter susan david linda michael sarah james emma robert alice thomas laura
william anna george helen henry kate oliver lucy daniel grace samuel clara edward rose
frank julia arthur nora victor ruth oscar irene
"""

ADJECTIVES = """
big small little large tiny huge tall short long old young new ancient modern red blue green
yellow black white brown gray pink purple golden silver happy sad angry calm quiet loud
busy lazy brave clever foolish kind cruel gentle friendly lonely hungry thirsty tired sleepy
rich poor strong weak heavy light dark bright warm cold hot cool wet dry clean dirty soft
hard smooth rough sharp round empty full cheap expensive famous strange simple difficult
easy beautiful ugly pretty handsome wild tame fresh stale sweet sour bitter salty
wooden broken narrow wide deep shallow fast slow early late
"""

DEGREE_ADVERBS = "very quite rather really extremely slightly".split()

MANNER_ADVERBS = """
quickly slowly carefully quietly loudly happily sadly suddenly gently softly angrily
eagerly proudly bravely politely calmly patiently nervously
"""

TIME_PHRASES = [
    "yesterday",
    "today",
    "tomorrow",
    "last night",
    "last week",
    "this morning",
    "this evening",
    "every morning",
    "every day",
    "on sunday",
    "on monday",
    "on friday",
    "in the afternoon",
    "in the winter",
    "in the summer",
    "after dinner",
    "before breakfast",
    "at midnight",
    "at noon",
    "once again",
]

PREPOSITIONS = """
in on under near behind beside above below inside outside across along around beyond
between toward
"""

# (base, past) of transitive verbs; the third person singular follows `_third_person`.
TRANSITIVE_VERBS = [
    ("paint", "painted"), ("clean", "cleaned"), ("open", "opened"), ("close", "closed"),
    ("carry", "carried"), ("watch", "watched"), ("visit", "visited"), ("help", "helped"),
    ("follow", "followed"), ("push", "pushed"), ("pull", "pulled"), ("wash", "washed"),
    ("fix", "fixed"), ("touch", "touched"), ("kick", "kicked"), ("cook", "cooked"),
    ("order", "ordered"), ("answer", "answered"), ("remember", "remembered"),
    ("collect", "collected"), ("deliver", "delivered"), ("discover", "discovered"),
    ("explain", "explained"), ("borrow", "borrowed"), ("study", "studied"),
    ("hide", "hid"), ("find", "found"), ("see", "saw"), ("take", "took"), ("give", "gave"),
    ("bring", "brought"), ("buy", "bought"), ("sell", "sold"), ("catch", "caught"),
    ("throw", "threw"), ("break", "broke"), ("build", "built"), ("draw", "drew"),
    ("eat", "ate"), ("forget", "forgot"), ("keep", "kept"), ("leave", "left"),
    ("lose", "lost"), ("make", "made"), ("meet", "met"), ("read", "read"), ("send", "sent"),
    ("steal", "stole"), ("teach", "taught"), ("write", "wrote"), ("hold", "held"),
    ("choose", "chose"), ("feed", "fed"), ("drive", "drove"), ("ride", "rode"),
    ("like", "liked"), ("love", "loved"), ("hate", "hated"), ("need", "needed"),
    ("want", "wanted"), ("check", "checked"), ("count", "counted"), ("fill", "filled"),
    ("move", "moved"), ("hear", "heard"), ("sing", "sang"), ("wear", "wore"),
]

# (base, past) of intransitive verbs.
INTRANSITIVE_VERBS = [
    ("sleep", "slept"), ("laugh", "laughed"), ("smile", "smiled"), ("cry", "cried"),
    ("wait", "waited"), ("arrive", "arrived"), ("dance", "danced"), ("jump", "jumped"),
    ("walk", "walked"), ("run", "ran"), ("swim", "swam"), ("sit", "sat"), ("stand", "stood"),
    ("fall", "fell"), ("rest", "rested"), ("work", "worked"), ("play", "played"),
    ("travel", "traveled"), ("shout", "shouted"), ("whisper", "whispered"),
    ("listen", "listened"), ("return", "returned"), ("hurry", "hurried"),
    ("climb", "climbed"), ("wander", "wandered"), ("stay", "stayed"), ("sneeze", "sneezed"),
    ("shiver", "shivered"), ("grow", "grew"), ("fly", "flew"),
]

NUMBERS = "two three four five six seven eight nine ten eleven twelve twenty forty hundred".split()

CONJUNCTIONS = "because while before after when although".split()

SUBJECT_PRONOUNS = {"he": True, "she": True, "it": True, "i": False, "we": False,
                    "you": False, "they": False}

_POSSESSIVES = "my your his her our their".split()
_DETERMINERS = ["the", "the", "the", "a", "this", "that", "every", "some"] + _POSSESSIVES
_PLURAL_DETERMINERS = ["the", "the", "some", "these", "those", "many", "a few"] + _POSSESSIVES


def _words(block: str) -> list[str]:
    return block.split()


def _plural(noun: str) -> str:
    if noun in IRREGULAR_PLURALS:
        return IRREGULAR_PLURALS[noun]
    if noun.endswith(("s", "x", "ch", "sh")):
        return noun + "es"
    if noun.endswith("y") and noun[-2] not in "aeiou":
        return noun[:-1] + "ies"
    return noun + "s"


def _third_person(verb: str) -> str:
    if verb.endswith(("s", "x", "ch", "sh", "o")):
        return verb + "es"
    if verb.endswith("y") and verb[-2] not in "aeiou":
        return verb[:-1] + "ies"
    return verb + "s"


@dataclass(frozen=True)
class _Subject:
    words: list[str]
    third_singular: bool


class SentenceGrammar:
    """Draws sentences of MIN_WORDS..MAX_WORDS lower-case words from hand-written templates."""

    def __init__(self) -> None:
        self.animate = _words(ANIMATE_NOUNS)
        self.nouns = self.animate + _words(THING_NOUNS)
        self.names = _words(NAMES)
        self.adjectives = _words(ADJECTIVES)
        self.manner_adverbs = _words(MANNER_ADVERBS)
        self.prepositions = _words(PREPOSITIONS)
        self._templates: list[Callable[[np.random.Generator], list[str]]] = [
            self._past_transitive,
            self._present_transitive,
            self._future_transitive,
            self._intransitive,
            self._compound,
            self._question,
            self._there_is,
            self._copula,
            self._wants_to,
            self._counted,
        ]

    # -- vocabulary ---------------------------------------------------------------------------

    def vocabulary(self) -> set[str]:
        """Every word form any template can produce (the lexicon covers exactly these)."""
        vocab: set[str] = set(self.nouns) | {_plural(n) for n in self.nouns}
        vocab |= set(self.names) | set(self.adjectives) | set(self.manner_adverbs)
        vocab |= set(self.prepositions) | set(DEGREE_ADVERBS) | set(NUMBERS) | set(CONJUNCTIONS)
        vocab |= set(SUBJECT_PRONOUNS)
        for phrase in TIME_PHRASES + _DETERMINERS + _PLURAL_DETERMINERS:
            vocab |= set(phrase.split())
        for base, past in TRANSITIVE_VERBS + INTRANSITIVE_VERBS:
            vocab |= {base, past, _third_person(base)}
        vocab |= set(_FUNCTION_WORDS)
        return vocab

    # -- sampling -----------------------------------------------------------------------------

    def sentence(self, rng: np.random.Generator) -> str:
        """One sentence (words joined by single spaces, no punctuation)."""
        while True:
            template = self._templates[rng.integers(len(self._templates))]
            words = template(rng)
            if MIN_WORDS <= len(words) <= MAX_WORDS:
                return " ".join(words)

    # -- phrases ------------------------------------------------------------------------------

    @staticmethod
    def _pick(rng: np.random.Generator, items: list[str]) -> str:
        return items[rng.integers(len(items))]

    def _article(self, det: str, next_word: str) -> list[str]:
        if det == "a" and next_word[0] in "aeiou":
            det = "an"
        return det.split()

    def _noun_phrase(
        self, rng: np.random.Generator, plural: bool = False, animate: bool = False
    ) -> list[str]:
        noun = self._pick(rng, self.animate if animate else self.nouns)
        head = [_plural(noun)] if plural else [noun]
        if rng.random() < 0.5:
            adj = self._pick(rng, self.adjectives)
            if rng.random() < 0.15:
                head = [self._pick(rng, DEGREE_ADVERBS), adj, *head]
            else:
                head = [adj, *head]
        det = self._pick(rng, _PLURAL_DETERMINERS if plural else _DETERMINERS)
        return self._article(det, head[0]) + head

    def _object(self, rng: np.random.Generator) -> list[str]:
        draw = rng.random()
        if draw < 0.15:
            return [self._pick(rng, self.names)]
        if draw < 0.3:
            return self._noun_phrase(rng, plural=True)
        return self._noun_phrase(rng)

    def _subject(self, rng: np.random.Generator, animate: bool = True) -> _Subject:
        draw = rng.random()
        if draw < 0.2:
            return _Subject([self._pick(rng, self.names)], True)
        if draw < 0.35:
            pronoun = self._pick(rng, list(SUBJECT_PRONOUNS))
            return _Subject([pronoun], SUBJECT_PRONOUNS[pronoun])
        if draw < 0.5:
            return _Subject(self._noun_phrase(rng, plural=True, animate=animate), False)
        return _Subject(self._noun_phrase(rng, animate=animate), True)

    def _place(self, rng: np.random.Generator) -> list[str]:
        return [self._pick(rng, self.prepositions), *self._noun_phrase(rng)]

    def _extras(self, rng: np.random.Generator) -> list[str]:
        extra: list[str] = []
        if rng.random() < 0.4:
            extra += self._place(rng)
        if rng.random() < 0.3:
            extra += self._pick(rng, TIME_PHRASES).split()
        return extra

    def _transitive(self, rng: np.random.Generator) -> tuple[str, str]:
        return TRANSITIVE_VERBS[rng.integers(len(TRANSITIVE_VERBS))]

    def _intransitive_verb(self, rng: np.random.Generator) -> tuple[str, str]:
        return INTRANSITIVE_VERBS[rng.integers(len(INTRANSITIVE_VERBS))]

    def _clause(self, rng: np.random.Generator) -> list[str]:
        subject = self._subject(rng)
        if rng.random() < 0.6:
            verb = self._transitive(rng)[1]
            return [*subject.words, verb, *self._object(rng)]
        verb = self._intransitive_verb(rng)[1]
        return [*subject.words, verb]

    # -- templates ----------------------------------------------------------------------------

    def _past_transitive(self, rng: np.random.Generator) -> list[str]:
        subject = self._subject(rng)
        adverb = [self._pick(rng, self.manner_adverbs)] if rng.random() < 0.25 else []
        verb = self._transitive(rng)[1]
        return [*subject.words, *adverb, verb, *self._object(rng), *self._extras(rng)]

    def _present_transitive(self, rng: np.random.Generator) -> list[str]:
        subject = self._subject(rng)
        base = self._transitive(rng)[0]
        verb = _third_person(base) if subject.third_singular else base
        negation = []
        if rng.random() < 0.2:
            negation = ["does", "not"] if subject.third_singular else ["do", "not"]
            verb = base
        return [*subject.words, *negation, verb, *self._object(rng), *self._extras(rng)]

    def _future_transitive(self, rng: np.random.Generator) -> list[str]:
        subject = self._subject(rng)
        modal = self._pick(rng, ["will", "can", "should", "might", "must", "could"])
        return [*subject.words, modal, self._transitive(rng)[0], *self._object(rng),
                *self._extras(rng)]

    def _intransitive(self, rng: np.random.Generator) -> list[str]:
        subject = self._subject(rng)
        verb = self._intransitive_verb(rng)[1]
        adverb = [self._pick(rng, self.manner_adverbs)] if rng.random() < 0.5 else []
        return [*subject.words, verb, *adverb, *self._place(rng), *self._extras(rng)]

    def _compound(self, rng: np.random.Generator) -> list[str]:
        return [*self._clause(rng), self._pick(rng, CONJUNCTIONS), *self._clause(rng)]

    def _question(self, rng: np.random.Generator) -> list[str]:
        subject = self._subject(rng)
        opener = self._pick(rng, ["did", "did", "where did", "why did", "when did", "how did"])
        return [*opener.split(), *subject.words, self._transitive(rng)[0], *self._object(rng),
                *self._extras(rng)]

    def _there_is(self, rng: np.random.Generator) -> list[str]:
        plural = rng.random() < 0.4
        verb = self._pick(rng, ["are", "were"] if plural else ["is", "was"])
        phrase = self._noun_phrase(rng, plural=plural)
        return ["there", verb, *phrase, *self._place(rng), *self._extras(rng)]

    def _copula(self, rng: np.random.Generator) -> list[str]:
        subject = self._subject(rng, animate=False)
        if subject.words == ["i"]:
            verb = self._pick(rng, ["am", "was"])
        elif subject.third_singular:
            verb = self._pick(rng, ["is", "was"])
        else:
            verb = self._pick(rng, ["are", "were"])
        degree = [self._pick(rng, DEGREE_ADVERBS)] if rng.random() < 0.4 else []
        adjective = self._pick(rng, self.adjectives)
        return [*subject.words, verb, *degree, adjective, *self._extras(rng)]

    def _wants_to(self, rng: np.random.Generator) -> list[str]:
        subject = self._subject(rng)
        verb = self._pick(rng, ["wants", "wanted", "tried", "hopes", "needs", "decided"])
        if not subject.third_singular and verb in ("wants", "hopes", "needs"):
            verb = verb[:-1]
        return [*subject.words, verb, "to", self._transitive(rng)[0], *self._object(rng),
                *self._extras(rng)]

    def _counted(self, rng: np.random.Generator) -> list[str]:
        subject = self._subject(rng)
        verb = self._transitive(rng)[1]
        count = self._pick(rng, NUMBERS)
        adjective = [self._pick(rng, self.adjectives)] if rng.random() < 0.5 else []
        noun = _plural(self._pick(rng, self.nouns))
        return [*subject.words, verb, count, *adjective, noun, *self._extras(rng)]


# Words the templates spell out literally (auxiliaries, question words, ...).
_FUNCTION_WORDS = """
does do not will can should might must could did where why when how there is was are were
am wants wanted tried hopes hope needs need decided to an
""".split()


def iter_unique_sentences(
    seed: int, stream: int, exclude: Iterable[str] = ()
) -> Iterator[str]:
    """Endless, deterministic stream of distinct sentences, skipping those in ``exclude``.

    ``stream`` selects an independent random stream for the same ``seed`` (test = 0, train = 1
    in the mini corpus), so the test set never shifts when the train size changes.
    """
    grammar = SentenceGrammar()
    rng = np.random.default_rng([seed, stream])
    seen = set(exclude)
    while True:
        sentence = grammar.sentence(rng)
        if sentence not in seen:
            seen.add(sentence)
            yield sentence
