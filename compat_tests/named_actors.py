"""Named actors: get_actor, get_if_exists, namespaces, duplicate names."""
import ray

ray.init(num_cpus=2, include_dashboard=False, namespace="compat")


@ray.remote
class Registry:
    def __init__(self, tag):
        self.tag = tag
        self.entries = []

    def register(self, x):
        self.entries.append(x)
        return f"{self.tag}:{len(self.entries)}"

    def dump(self):
        return self.tag, list(self.entries)


a = Registry.options(name="registry").remote("first")
print(ray.get(a.register.remote("x")))
same = ray.get_actor("registry")
print(ray.get(same.register.remote("y")))
again = Registry.options(name="registry", get_if_exists=True).remote("ignored")
print(ray.get(again.register.remote("z")))
print(ray.get(a.dump.remote()))
other = Registry.options(name="registry", namespace="elsewhere").remote("second")
print(ray.get(other.register.remote("w")))
print(ray.get(ray.get_actor("registry", namespace="elsewhere").dump.remote()))
try:
    ray.get_actor("no-such-actor")
except ValueError:
    print("missing named actor: ValueError")
try:
    Registry.options(name="registry").remote("dup")
    print("duplicate name accepted")
except ValueError:
    print("duplicate name: ValueError")
ray.shutdown()
