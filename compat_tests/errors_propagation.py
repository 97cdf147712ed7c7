"""Errors: user exception classes survive get; errors flow through dependent tasks."""
import ray
from ray.exceptions import RayTaskError

ray.init(num_cpus=2, include_dashboard=False)


class InsufficientFunds(Exception):
    def __init__(self, amount):
        super().__init__(f"short by {amount}")
        self.amount = amount


@ray.remote
def withdraw(balance, amount):
    if amount > balance:
        raise InsufficientFunds(amount - balance)
    return balance - amount


@ray.remote
def double(x):
    return 2 * x


@ray.remote
def divide(a, b):
    return a / b


try:
    ray.get(withdraw.remote(10, 25))
except InsufficientFunds as e:
    print("caught user class", type(e).__name__.startswith("RayTaskError"), isinstance(e, RayTaskError), e.amount)

# The error propagates through tasks that depend on the failed one, which never run.
try:
    ray.get(double.remote(double.remote(withdraw.remote(1, 2))))
except InsufficientFunds:
    print("propagated through two tasks")

try:
    ray.get(divide.remote(1, 0))
except ZeroDivisionError:
    print("ZeroDivisionError")

ok = [withdraw.remote(100, i) for i in range(0, 200, 40)]
results = []
for r in ok:
    try:
        results.append(ray.get(r))
    except InsufficientFunds as e:
        results.append(f"error {e.amount}")
print("mixed", results)
ray.shutdown()
