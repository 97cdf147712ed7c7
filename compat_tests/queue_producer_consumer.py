"""ray.util.queue.Queue between an actor producer and the driver, and between tasks."""
import ray
from ray.util.queue import Empty, Queue

ray.init(num_cpus=2, include_dashboard=False)


@ray.remote
class Producer:
    def __init__(self, queue):
        self.queue = queue

    def produce(self, n):
        for i in range(n):
            self.queue.put(i * i)
        return n


@ray.remote
def consume(queue, n):
    return [queue.get(timeout=30) for _ in range(n)]


q = Queue(maxsize=100)
producer = Producer.remote(q)
print("produced", ray.get(producer.produce.remote(10)))
print("driver got", [q.get(timeout=30) for _ in range(10)])
print("empty", q.empty(), "size", q.qsize())
ray.get(producer.produce.remote(5))
print("task got", ray.get(consume.remote(q, 5)))
q.put_nowait_batch([1, 2, 3])
print("batch", q.get_nowait_batch(3))
try:
    q.get_nowait()
except Empty:
    print("get_nowait on empty: Empty")
ray.shutdown()
