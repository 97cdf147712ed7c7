"""Refs nested in containers are passed as refs (not resolved); top-level refs are resolved."""
import ray

ray.init(num_cpus=2, include_dashboard=False)


@ray.remote
def produce(x):
    return x * 2


@ray.remote
def inspect_arg(arg):
    if isinstance(arg, ray.ObjectRef):
        return "ref", ray.get(arg)
    if isinstance(arg, list):
        return "list", [ray.get(r) for r in arg]
    if isinstance(arg, dict):
        return "dict", {k: ray.get(v) for k, v in sorted(arg.items())}
    return "value", arg


r = produce.remote(21)
print("top level", ray.get(inspect_arg.remote(r)))
print("in list", ray.get(inspect_arg.remote([r, produce.remote(1)])))
print("in dict", ray.get(inspect_arg.remote({"a": r, "b": produce.remote(2)})))
print("put list", ray.get(inspect_arg.remote(ray.put([1, 2]))))
nested = ray.put({"inner": [produce.remote(5)]})
print("ref inside put", ray.get(ray.get(nested)["inner"][0]))
ray.shutdown()
