"""Actor errors: a raising method leaves the actor alive; failed __init__; killed actor."""
import ray
from ray.exceptions import RayActorError

ray.init(num_cpus=2, include_dashboard=False)


@ray.remote
class Account:
    def __init__(self, balance):
        if balance < 0:
            raise ValueError("negative opening balance")
        self.balance = balance

    def withdraw(self, amount):
        if amount > self.balance:
            raise ValueError(f"insufficient: {self.balance} < {amount}")
        self.balance -= amount
        return self.balance


acct = Account.remote(100)
for amount in (30, 80, 50, 10):
    try:
        print("withdraw", amount, "->", ray.get(acct.withdraw.remote(amount)))
    except ValueError as e:
        print("withdraw", amount, "failed:", str(e).splitlines()[-1])

broken = Account.remote(-1)
try:
    ray.get(broken.withdraw.remote(1))
except RayActorError:
    print("method on failed actor: RayActorError")

victim = Account.remote(5)
print("before kill", ray.get(victim.withdraw.remote(1)))
ray.kill(victim)
try:
    ray.get(victim.withdraw.remote(1))
except RayActorError:
    print("after kill: RayActorError")
ray.shutdown()
