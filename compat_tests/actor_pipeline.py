"""Actor-to-actor pipeline: each stage's output ref feeds the next stage directly."""
import ray

ray.init(num_cpus=2, include_dashboard=False)


@ray.remote
class Stage:
    def __init__(self, name, factor):
        self.name = name
        self.factor = factor
        self.seen = 0

    def process(self, item):
        self.seen += 1
        return [x * self.factor for x in item] + [self.seen]

    def seen_count(self):
        return self.name, self.seen


stages = [Stage.remote(f"s{i}", i + 2) for i in range(3)]
outputs = []
for step in range(30):
    ref = ray.put([step])
    for s in stages:
        ref = s.process.remote(ref)
    outputs.append(ref)
results = ray.get(outputs)
print("first", results[0])
print("last", results[-1])
print("counts", ray.get([s.seen_count.remote() for s in stages]))
ray.shutdown()
