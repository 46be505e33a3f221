"""The one hybrid ranking (storage/ranking.py) both backends' memory searches use."""

from __future__ import annotations

import numpy as np
import pytest

from custom_components.langgraph_conversation.storage.ranking import (
    SEMANTIC_WEIGHT,
    hybrid_scores,
)


def _scores(pairs: dict[int, float]) -> tuple[np.ndarray, np.ndarray]:
    ids = np.array(list(pairs), dtype=np.int64)
    return ids, np.array(list(pairs.values()), dtype=np.float64)


def test_words_and_meaning_add_up_each_scaled_to_one() -> None:
    """The best word rank counts as 1, a cosine as itself; each weighs its share."""
    ids, scores = hybrid_scores(_scores({1: 4.0, 2: 2.0}), _scores({2: 0.8, 3: 0.5}))
    assert ids.tolist() == [1, 2, 3]
    assert scores.tolist() == pytest.approx(
        [
            1 - SEMANTIC_WEIGHT,
            (1 - SEMANTIC_WEIGHT) * 0.5 + SEMANTIC_WEIGHT * 0.8,
            SEMANTIC_WEIGHT * 0.5,
        ]
    )


def test_what_scores_nothing_is_left_out() -> None:
    """A negative cosine counts as no likeness; word ranks that are all 0 count nothing."""
    ids, scores = hybrid_scores(_scores({1: 0.0}), _scores({1: -0.3, 2: 0.0, 3: 0.2}))
    assert ids.tolist() == [3]
    assert scores.tolist() == pytest.approx([SEMANTIC_WEIGHT * 0.2])


def test_one_side_alone_still_ranks() -> None:
    """Items without a vector rank by their words; a search without words by meaning."""
    empty = _scores({})
    assert hybrid_scores(_scores({5: 2.0}), empty)[1].tolist() == [1 - SEMANTIC_WEIGHT]
    assert hybrid_scores(empty, _scores({5: 1.0}))[1].tolist() == [SEMANTIC_WEIGHT]
