"""Docs-style MapReduce word count: map tasks, a shuffle through refs, reduce tasks.

Each map task counts the words of one chunk of documents and returns one partition per
reducer (``num_returns``); partition j of every mapper is handed, as refs, to reducer j,
which merges them.  Words go to a reducer by a stable hash (crc32), never by ``hash()``,
which differs between worker processes.
"""
import zlib
from collections import Counter

import numpy as np

import ray

ray.init(num_cpus=2, include_dashboard=False)

NUM_MAPPERS = 6
NUM_REDUCERS = 3
VOCABULARY = ("ray actor task object ref remote get put wait shuffle map reduce "
              "driver worker cluster node queue pool batch model").split()


def make_corpus(num_docs, seed):
    rng = np.random.default_rng(seed)
    weights = 1.0 / np.arange(1, len(VOCABULARY) + 1)  # Zipf-like: a few words dominate
    weights /= weights.sum()
    docs = []
    for _ in range(num_docs):
        length = int(rng.integers(5, 40))
        docs.append(" ".join(rng.choice(VOCABULARY, size=length, p=weights)))
    return docs


def partition_of(word):
    return zlib.crc32(word.encode()) % NUM_REDUCERS


@ray.remote(num_returns=NUM_REDUCERS)
def map_words(docs):
    counts = Counter(word for doc in docs for word in doc.split())
    parts = [dict() for _ in range(NUM_REDUCERS)]
    for word, n in counts.items():
        parts[partition_of(word)][word] = n
    return tuple(parts)


@ray.remote
def reduce_words(*partitions):
    total = Counter()
    for part in partitions:
        total.update(part)
    return dict(total)


corpus = make_corpus(600, seed=11)
chunks = [corpus[i::NUM_MAPPERS] for i in range(NUM_MAPPERS)]

# Map: one list of NUM_REDUCERS refs per mapper.
map_outputs = [map_words.remote(chunk) for chunk in chunks]
# Shuffle: reducer j receives partition j of every mapper, as refs.
reduce_refs = [reduce_words.remote(*[out[j] for out in map_outputs]) for j in range(NUM_REDUCERS)]
reduced = ray.get(reduce_refs)

counts = {}
for part in reduced:
    assert not set(part) & set(counts), "a word reached two reducers"
    counts.update(part)

expected = Counter(word for doc in corpus for word in doc.split())
top = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))[:8]
print("documents", len(corpus), "mappers", NUM_MAPPERS, "reducers", NUM_REDUCERS)
print("words", sum(counts.values()), "distinct", len(counts))
print("words per reducer", [sum(part.values()) for part in reduced])
print("top", top)
print("matches a local count", counts == dict(expected))
ray.shutdown()
