"""Docs-style batch inference: a small numpy model held by actors, batches mapped over an ActorPool.

The model's weights are put in the object store once and every predictor actor is built
from that ref; the data set is cut into batches, ``ActorPool.map`` runs them (results come
back in submission order), and a second pass submits the same batches round-robin to the
actors by hand.  Printed: per-class counts, a checksum and the agreement of the two passes.
"""
import numpy as np

import ray
from ray.util import ActorPool

ray.init(num_cpus=2, include_dashboard=False)

NUM_FEATURES = 12
NUM_HIDDEN = 24
NUM_CLASSES = 4
NUM_ROWS = 2000
BATCH_SIZE = 125


def make_model(seed):
    rng = np.random.default_rng(seed)
    return {
        "w1": rng.standard_normal((NUM_FEATURES, NUM_HIDDEN)),
        "b1": rng.standard_normal(NUM_HIDDEN) * 0.1,
        "w2": rng.standard_normal((NUM_HIDDEN, NUM_CLASSES)),
        "b2": rng.standard_normal(NUM_CLASSES) * 0.1,
    }


@ray.remote
class Predictor:
    def __init__(self, model):
        # `model` arrives resolved: the driver passed the ref that ray.put returned.
        self.model = model
        self.rows_seen = 0

    def predict(self, batch):
        m = self.model
        hidden = np.maximum(batch @ m["w1"] + m["b1"], 0.0)
        logits = hidden @ m["w2"] + m["b2"]
        self.rows_seen += len(batch)
        return logits.argmax(axis=1)

    def rows(self):
        return self.rows_seen


rng = np.random.default_rng(7)
data = rng.standard_normal((NUM_ROWS, NUM_FEATURES))
batches = [data[i:i + BATCH_SIZE] for i in range(0, NUM_ROWS, BATCH_SIZE)]

model_ref = ray.put(make_model(seed=3))
predictors = [Predictor.remote(model_ref) for _ in range(2)]

# Pass 1: ActorPool.map keeps the input order.
pool = ActorPool(predictors)
pooled = np.concatenate(list(pool.map(lambda actor, batch: actor.predict.remote(batch), batches)))

# Pass 2: the same batches, round-robin over the actors, gathered with one ray.get.
refs = [predictors[i % len(predictors)].predict.remote(batch) for i, batch in enumerate(batches)]
manual = np.concatenate(ray.get(refs))

print("batches", len(batches), "rows", len(pooled))
print("class counts", np.bincount(pooled, minlength=NUM_CLASSES).tolist())
print("checksum", int(np.sum(pooled * np.arange(len(pooled)))))
print("first 12", pooled[:12].tolist())
print("passes agree", bool(np.array_equal(pooled, manual)))
print("rows per actor", ray.get([p.rows.remote() for p in predictors]))
ray.shutdown()
