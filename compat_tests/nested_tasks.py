"""Tasks that submit tasks and wait for them (recursion through the scheduler)."""
import ray

ray.init(num_cpus=2, include_dashboard=False)


@ray.remote
def leaf(x):
    return x * 3


@ray.remote
def fan_out(n):
    return sum(ray.get([leaf.remote(i) for i in range(n)]))


@ray.remote
def fib(n):
    if n < 2:
        return n
    return ray.get(fib.remote(n - 1)) + ray.get(fib.remote(n - 2))


@ray.remote
def make_ref(x):
    # Returns a ref created inside a task: the caller gets a ref to a ref.
    return leaf.remote(x)


print("fan_out", ray.get([fan_out.remote(n) for n in range(1, 5)]))
print("fib(6)", ray.get(fib.remote(6)))
print("ref of ref", ray.get(ray.get(make_ref.remote(7))))
ray.shutdown()
