"""Text-only (blind) diagnostic: how much of each subtask a model can answer without looking.

A test-set stress test in the manner of TsT-RF: a random forest sees only what the question
text gives away (the labels it names, its options or answer classes, their letters, how many
there are) and is fit with scene-grouped k-fold cross-validation (`crossval.py`; each scene keeps
its fold when items are removed), so every item is predicted by a model that never saw its scene. Its features are statistics of the training folds, and the
training rows' own features are cross-fitted (statistics of the other inner folds), so no row's
features contain its own answer (leave-one-out encodings would: the forest reads the answer back
from the shift it makes in the mean).

- multiple choice (`choice`, `direction`, `order`, `relations`): one row per (item, candidate).
  Win rates of the candidate's text, of its letter position given the number of options, of the
  candidate given the first named label and given the whole label set; for orders the mean rate
  at which each label precedes another; the candidate's position and the option count. The
  forest's row probabilities, normalised over an item's candidates, give P(gold).
- numbers (`numeric`, `count`, `grounding`): means of the (log) answer per first label, last label
  and label set, shrunk towards the global mean, and how many items each rests on; the forest
  predicts the answer.

Beside the forest, the priors a model learns first are fit on the same folds (`priors.py`: per
label, label set or template the median or most frequent answer; the answer or letter given the
template or the option count). A subtask's shortcut is the **strongest** of all these predictors,
chosen per fold by its score on the other folds, and the report names it.

Each item gets a **bias score** from the predictor chosen for its fold: the cross-validated P(gold)
for multiple choice, the MRA of the blind prediction for numbers (what Iterative Bias Pruning ranks
by, so pruning removes what the strongest predictor exploits). Each subtask gets a **blind
score** in VSI-Bench's metric (accuracy for multiple choice, MRA for numbers) beside the chance
score (mean 1 / candidates; none for numbers and relation sets) and the best constant answer's
score (the most frequent letter or answer text, or the constant with the best MRA, chosen
in-sample, which favours the constant). The gain is the blind score above chance where there is
one (a constant answer that beats chance is a shortcut too), else above the best constant. A
subtask whose items use several verifier kinds is diagnosed per kind and summarised weighted by
items.

The features are sums over integer key ids (`np.bincount`), not per-key dicts, and a `diagnose` call
may fit its (subtask, kind) groups in worker processes (`parallel.py`; sampling hands it the build's
workers from 20,000 candidates up): either way the rows and the scores are the same, bit for bit.
"""

from numerical3d.pipeline.blind.crossval import BlindScore, Diagnosis, baseline, diagnose
from numerical3d.pipeline.blind.features import named_labels, vector_mra
from numerical3d.pipeline.blind.pruning import DebiasReport, PrunedSubtask, prune

__all__ = ["BlindScore", "DebiasReport", "Diagnosis", "PrunedSubtask", "baseline", "diagnose", "named_labels",
           "prune", "vector_mra"]
