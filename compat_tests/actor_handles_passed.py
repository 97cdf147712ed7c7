"""Actor handles passed to tasks and to other actors, which then call the actor."""
import ray

ray.init(num_cpus=2, include_dashboard=False)


@ray.remote
class Store:
    def __init__(self):
        self.items = {}

    def set(self, key, value):
        self.items[key] = value
        return len(self.items)

    def get(self, key):
        return self.items.get(key)

    def keys(self):
        return sorted(self.items)


@ray.remote
def writer(store, key, value):
    return ray.get(store.set.remote(key, value))


@ray.remote
class Client:
    def __init__(self, store, name):
        self.store = store
        self.name = name

    def put(self, i):
        return ray.get(self.store.set.remote(f"{self.name}-{i}", i))

    def read(self, i):
        return ray.get(self.store.get.remote(f"{self.name}-{i}"))


store = Store.remote()
for i in range(5):
    print("writer", ray.get(writer.remote(store, f"k{i}", i)))
client = Client.remote(store, "c")
for i in range(5):
    ray.get(client.put.remote(i))
print("client reads", ray.get([client.read.remote(i) for i in range(5)]))
print("handle in a list", ray.get(writer.remote(*[store], "listed", 1)))
print("keys", ray.get(store.keys.remote()))
ray.shutdown()
