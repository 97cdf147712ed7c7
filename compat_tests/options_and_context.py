"""Per-call options (num_cpus, name, resources) and what the runtime context tells a task."""
import ray

ray.init(num_cpus=2, include_dashboard=False, resources={"widget": 2})


@ray.remote(num_cpus=1)
def in_task():
    ctx = ray.get_runtime_context()
    return ctx.get_actor_id() is None, ctx.get_task_id() is not None


@ray.remote(resources={"widget": 1})
def uses_widget(x):
    return x + 1


@ray.remote
class Named:
    def whoami(self):
        ctx = ray.get_runtime_context()
        return ctx.get_actor_id() is not None, ctx.get_actor_name()


print("task context", ray.get(in_task.remote()))
print("custom resource", ray.get([uses_widget.remote(i) for i in range(4)]))
print("fractional cpus", ray.get(in_task.options(num_cpus=0.5).remote()))
print("named task", ray.get(uses_widget.options(name="custom-name").remote(1)))
n = Named.options(name="who").remote()
print("actor context", ray.get(n.whoami.remote()))
print("resources", ray.cluster_resources().get("widget"), ray.cluster_resources().get("CPU"))
print("initialized", ray.is_initialized())
ray.shutdown()
print("after shutdown", ray.is_initialized())
