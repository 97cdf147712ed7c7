"""The node's resources: what tasks and actors take (CPU, GPU ids, custom), and placement groups' bundles.

::

    task pool (core.task_pool) ──fits/acquire/release, take_gpus/give_gpus──▶ NodeResources.available
    actor table (core.actors)  ──the same, for an actor's whole life──────────┘   │
    a spec in a placement group ──pg_fits/pg_acquire/pg_release──▶ ResourceLedger (core.pg_accounting)
                                                                   (it reserves bundles from ``available``)

``total`` and ``available`` are the scheduler's float dicts that ``ResourceLedger`` shares (this object
is its ``node``).  Not thread-safe: everything runs under the runtime's lock.  ``on_groups_placed()`` is
called when giving resources back let a pending placement group be placed (the actor table then retries
the actor starts that waited for it).
"""

from __future__ import annotations

import warnings


class NodeResources:
    def __init__(self, total, num_gpus, node_id, on_groups_placed):
        self.total = total
        self.available = dict(total)
        self.num_gpus = num_gpus
        self.node_id = node_id             # (the ledger names the node in placement_group_table())
        self.free_gpu_ids = list(range(int(num_gpus)))
        self.lent_cpu = 0.0                # CPUs of tasks blocked in get, lent to nested work
        self._placement = None
        self._infeasible_warned = set()
        self._on_groups_placed = on_groups_placed

    # ================================================================== the node's own resources
    def fits(self, res):
        avail = self.available
        for k, v in res.items():
            if avail.get(k, 0.0) + 1e-9 < v:
                return False
        return True

    def feasible(self, res):
        for k, v in res.items():
            if self.total.get(k, 0.0) + 1e-9 < v:
                return False
        return True

    def acquire(self, res):
        for k, v in res.items():
            self.available[k] = self.available.get(k, 0.0) - v

    def release(self, res):
        for k, v in res.items():
            self.available[k] = self.available.get(k, 0.0) + v
        if self._placement is not None and self._placement.place_pending():
            self._on_groups_placed()

    def lend_cpu(self, cpu):
        """A task blocked in get gives its CPU to nested work (Ray still reports it as in use)."""
        self.lent_cpu += cpu
        self.release({"CPU": cpu})

    def reclaim_cpu(self, cpu):
        self.lent_cpu -= cpu
        self.acquire({"CPU": cpu})

    def take_gpus(self, n):
        if not n:
            return ()
        count = max(1, int(n)) if n >= 1 else 1
        if n < 1:
            return tuple(self.free_gpu_ids[:1]) or (0,)
        taken = self.free_gpu_ids[:count]
        del self.free_gpu_ids[:count]
        return tuple(taken)

    def give_gpus(self, gpu_ids, n):
        if n and n >= 1:
            self.free_gpu_ids.extend(gpu_ids)
            self.free_gpu_ids.sort()

    def warn_infeasible(self, res):
        key = tuple(sorted(res.items()))
        if key not in self._infeasible_warned:
            self._infeasible_warned.add(key)
            warnings.warn(f"The following resource request cannot be scheduled right now: {dict(res)}. "
                          f"This node has {self.total}; the task will wait until resources are added.",
                          stacklevel=3)

    def view(self, which):
        """``cluster_resources()`` ("total") or ``available_resources()``, group entries included."""
        if which == "total":
            view = dict(self.total)
        else:
            # A task blocked in get lends its CPU to nested work, but Ray still reports it as in use.
            view = dict(self.available)
            view["CPU"] = view.get("CPU", 0.0) - self.lent_cpu
            view = {k: v for k, v in view.items() if v > 1e-9}
        if self._placement is not None:
            view.update(self._placement.resource_view(which))
        return view

    # ================================================================== placement groups (accounting only)
    @staticmethod
    def pg_of(options):
        strategy = options.get("scheduling_strategy")
        pg = options.get("placement_group")
        index = options.get("placement_group_bundle_index", -1)
        capture = bool(options.get("placement_group_capture_child_tasks"))
        if strategy is not None and hasattr(strategy, "placement_group"):
            pg = strategy.placement_group
            index = getattr(strategy, "placement_group_bundle_index", -1)
            capture = bool(getattr(strategy, "placement_group_capture_child_tasks", False))
        if pg is None or pg == "default":
            return None
        return (pg.id.binary() if hasattr(pg.id, "binary") else pg.id, -1 if index is None else index, capture)

    @staticmethod
    def pg_info(spec):
        if not spec.pg:
            return None
        return (spec.pg[0].hex(), spec.pg[2] if len(spec.pg) > 2 else False)

    def check_pg_request(self, pg, demand, what):
        """Ray rejects at submission a request that no bundle of the group could ever hold."""
        bundles = self.ledger().bundles_of(pg[0])
        if bundles is None:
            return
        n = len(bundles)
        if pg[1] >= n or pg[1] < -1:
            raise ValueError(f"placement group bundle index {pg[1]} is invalid. Valid placement group indexes: "
                             f"0-{n - 1}")
        choices = range(n) if pg[1] == -1 else [pg[1]]
        if not any(all(bundles[i].get(k, 0.0) + 1e-9 >= v for k, v in demand.items() if v) for i in choices):
            raise ValueError(f"Cannot schedule {what} with the placement group because the resource request "
                             f"{dict(demand)} cannot fit into any bundles for the placement group, "
                             f"{[dict(b) for b in bundles]}.")

    def ledger(self):
        if self._placement is None:
            from . import pg_accounting as _pg_accounting
            self._placement = _pg_accounting.ResourceLedger(self)
        return self._placement

    def pg_fits(self, spec, demand):
        return self.ledger().can_acquire(spec.pg[0], spec.pg[1], demand)

    def pg_acquire(self, spec, demand):
        """Take ``demand`` from ``spec``'s group; ``spec.pg`` then names the bundle it came from."""
        spec.pg = (spec.pg[0], self.ledger().acquire(spec.pg[0], spec.pg[1], demand)) + tuple(spec.pg[2:])

    def pg_release(self, spec, demand):
        self.ledger().release(spec.pg[0], spec.pg[1], demand)
