"""The built-in toy corpus: English-like sentences from a small seeded grammar.

Chosen over a bundled book because its structure is known: the verb agrees in number with a
subject that prepositional phrases and relative clauses can separate from it, so a head that
attends from the verb back to the subject is exactly what a good model must learn.
"""

from __future__ import annotations

import random

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


def noun_phrase(rng: random.Random, plural: bool, depth: int) -> list[str]:
    det = rng.choice(["the", "some", "many"] if plural else ["the", "a", "every", "one"])
    words = [det] + ([rng.choice(ADJECTIVES)] if rng.random() < 0.4 else []) + [rng.choice(NOUNS)[plural]]
    r = rng.random()
    if depth > 0 and r < 0.25:  # prepositional phrase: its noun's number is a distractor
        words += [rng.choice(PREPOSITIONS)] + noun_phrase(rng, rng.random() < 0.5, depth - 1)
    elif depth > 0 and r < 0.45:  # relative clause: "that <verb> <object>"
        words += ["that", rng.choice(TRANSITIVE)[not plural]] + noun_phrase(rng, rng.random() < 0.5, depth - 1)
    return words


def sentence(rng: random.Random) -> tuple[list[str], int]:
    """One sentence and its label: 1 if the main subject is plural, else 0."""
    plural = rng.random() < 0.5
    words = noun_phrase(rng, plural, depth=2)
    if rng.random() < 0.5:
        words.append(rng.choice(INTRANSITIVE)[plural])
    else:
        words += [rng.choice(TRANSITIVE)[plural]] + noun_phrase(rng, rng.random() < 0.5, depth=1)
    if rng.random() < 0.3:
        words += rng.choice(ADVERBS).split()
    return words + ["."], int(plural)


def corpus(n: int, seed: int) -> list[tuple[list[str], int]]:
    rng = random.Random(seed)
    return [sentence(rng) for _ in range(n)]
