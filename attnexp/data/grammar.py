"""The built-in toy corpus: English-like sentences from a small seeded grammar.

Chosen over a bundled book because its structure is known: the main verb agrees in number with
a subject that prepositional phrases and relative clauses separate from it, and the nouns in
between are attractors, of the other number more often than not (Linzen et al. 2016's agreement
task). A phrase fronted before the subject ("near the dogs , the cat ...") moves the subject away
from a fixed position. So the head that attends from the verb to its subject is what a good model
must learn, and every sentence knows where both are (`subject`, `verb`).

For classification the label is the subject's number, and the verbs are in the past tense, so no
verb gives it away: the model must find the subject among the attractors. Half the sentences open
with a fronted phrase, so neither the first noun nor the nearest noun to the verb decides it.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

NOUNS = [("cat", "cats"), ("dog", "dogs"), ("bird", "birds"), ("child", "children"), ("teacher", "teachers"),
         ("farmer", "farmers"), ("king", "kings"), ("queen", "queens"), ("robot", "robots"), ("student", "students"),
         ("doctor", "doctors"), ("horse", "horses"), ("pilot", "pilots"), ("artist", "artists"), ("mouse", "mice")]
INTRANSITIVE = [("sleeps", "sleep"), ("runs", "run"), ("sings", "sing"), ("waits", "wait"), ("laughs", "laugh"),
                ("dances", "dance"), ("works", "work"), ("smiles", "smile")]
TRANSITIVE = [("sees", "see"), ("likes", "like"), ("chases", "chase"), ("helps", "help"), ("finds", "find"),
              ("follows", "follow"), ("teaches", "teach"), ("watches", "watch")]
ADJECTIVES = ["small", "big", "old", "young", "happy", "quiet", "red", "clever", "tired", "brave"]
PREPOSITIONS = ["near", "behind", "with", "under", "beside"]
ADVERBS = ["today", "again", "slowly", "quickly", "often", "at night"]
PAST_INTRANSITIVE = ["slept", "ran", "sang", "waited", "laughed", "danced", "worked", "smiled"]
PAST_TRANSITIVE = ["saw", "liked", "chased", "helped", "found", "followed", "taught", "watched"]
ATTRACT = 0.7  # chance that a noun between subject and verb has the other number


@dataclass
class Sentence:
    words: list[str]
    plural: bool  # the main subject's number (the classification label)
    subject: int  # index of the subject's head noun in `words`
    verb: int  # index of the main verb


def noun_phrase(rng: random.Random, plural: bool, depth: int, past: bool = False) -> tuple[list[str], int]:
    """Words of a noun phrase and the index of its head noun."""
    det = rng.choice(["the", "some", "many"] if plural else ["the", "a", "every", "one"])
    words = [det] + ([rng.choice(ADJECTIVES)] if rng.random() < 0.4 else [])
    head = len(words)
    words.append(rng.choice(NOUNS)[plural])
    other = (not plural) if rng.random() < ATTRACT else plural  # an attractor, mostly of the other number
    r = rng.random()
    if depth > 0 and r < 0.35:  # prepositional phrase: its noun's number is a distractor
        words += [rng.choice(PREPOSITIONS)] + noun_phrase(rng, other, depth - 1, past)[0]
    elif depth > 0 and r < 0.6:  # relative clause: "that <verb> <object>"
        verb = rng.choice(PAST_TRANSITIVE) if past else rng.choice(TRANSITIVE)[plural]
        words += ["that", verb] + noun_phrase(rng, other, depth - 1, past)[0]
    return words, head


def sentence(rng: random.Random, past: bool = False) -> Sentence:
    """One sentence: present tense (the verbs agree with their subjects) or, with `past`, past
    tense (no verb shows a number) and a fronted phrase in half the sentences."""
    words: list[str] = []
    if rng.random() < (0.5 if past else 0.3):  # a fronted phrase, so the subject is not at a fixed position
        words += [rng.choice(PREPOSITIONS)] + noun_phrase(rng, rng.random() < 0.5, 1, past)[0] + [","]
    plural = rng.random() < 0.5
    np_words, head = noun_phrase(rng, plural, 2, past)
    subject = len(words) + head
    words += np_words
    verb = len(words)
    if rng.random() < 0.5:
        words.append(rng.choice(PAST_INTRANSITIVE) if past else rng.choice(INTRANSITIVE)[plural])
    else:
        words += [rng.choice(PAST_TRANSITIVE) if past else rng.choice(TRANSITIVE)[plural]]
        words += noun_phrase(rng, rng.random() < 0.5, 1, past)[0]
    if rng.random() < 0.3:
        words += rng.choice(ADVERBS).split()
    return Sentence(words + ["."], plural, subject, verb)


def corpus(n: int, seed: int, past: bool = False) -> list[Sentence]:
    rng = random.Random(seed)
    return [sentence(rng, past) for _ in range(n)]
