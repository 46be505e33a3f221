"""The hybrid ranking of a memory search: words and meaning in one score, for every backend.

    score = SEMANTIC_WEIGHT * max(cosine similarity, 0)
            + (1 - SEMANTIC_WEIGHT) * word rank / best word rank of this search

Both parts lie in [0, 1]: the word rank (SQLite's BM25, PostgreSQL's ts_rank; higher is
better) is divided by the best one among the search's candidates, and a negative cosine
counts as no likeness at all. An item found only by its words (no vector yet: saved while
the embedding model was down) or only by its meaning still ranks; an item that scores
nothing is left out. The backends order equal scores themselves.
"""

from __future__ import annotations

import numpy as np

# Share of the vectors' cosine similarity in a hybrid score; the rest is the words' rank.
SEMANTIC_WEIGHT = 0.5

# Item ids (any integers that name the candidates of one search) and their scores.
type Scores = tuple[np.ndarray, np.ndarray]


def hybrid_scores(by_words: Scores, by_meaning: Scores) -> Scores:
    """The candidates' hybrid scores (module docstring), each id once, in id order; ids
    given once per side."""
    (word_ids, word_ranks), (meaning_ids, similarities) = by_words, by_meaning
    ids = np.union1d(word_ids, meaning_ids)
    scores = np.zeros(len(ids))
    if word_ranks.size and word_ranks.max() > 0:
        scores[np.searchsorted(ids, word_ids)] += (
            (1 - SEMANTIC_WEIGHT) * word_ranks / word_ranks.max()
        )
    scores[np.searchsorted(ids, meaning_ids)] += SEMANTIC_WEIGHT * np.maximum(similarities, 0)
    keep = scores > 0
    return ids[keep], scores[keep]
