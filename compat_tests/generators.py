"""Generator tasks: streaming (the default for generators) and a fixed num_returns."""
import ray

ray.init(num_cpus=2, include_dashboard=False)


@ray.remote
def count_up(n):
    for i in range(n):
        yield i * i


@ray.remote(num_returns=3)
def three():
    for i in range(3):
        yield f"item{i}"


print("streamed", [ray.get(r) for r in count_up.remote(5)])
print("fixed", ray.get(list(three.remote())))
ray.shutdown()
