"""An actor's state and call order: calls from one caller run in submission order."""
import ray

ray.init(num_cpus=2, include_dashboard=False)


@ray.remote
def slow_value(i):
    # Later calls' arguments become ready first; order must still hold.
    import time
    time.sleep(0.002 * (10 - i % 10))
    return i


@ray.remote
class Counter:
    def __init__(self, start=0):
        self.value = start
        self.log = []

    def add(self, x):
        self.value += x
        self.log.append(x)
        return self.value

    def get(self):
        return self.value

    def history(self):
        return list(self.log)


c = Counter.remote(5)
print("adds", ray.get([c.add.remote(i) for i in range(10)]))
refs = [c.add.remote(slow_value.remote(i)) for i in range(20)]
print("ordered adds", ray.get(refs))
print("value", ray.get(c.get.remote()))
print("history", ray.get(c.history.remote())[-5:])
others = [Counter.remote(i) for i in range(3)]
for step in range(25):
    ray.get([o.add.remote(step) for o in others])
print("others", ray.get([o.get.remote() for o in others]))
ray.shutdown()
