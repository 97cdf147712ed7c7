"""``ResourceLedger``: placement-group accounting as plain data, without processes.

The ledger shares the scheduler's ``total``/``available`` dicts; here it gets
a node of its own (a mapping of totals) so every rule can be checked directly.
"""

import pytest

from rayreact.core.pg_accounting import ResourceLedger

A, B, C = b"a" * 18, b"b" * 18, b"c" * 18


def node_free(ledger):
    return ledger._node.available


@pytest.fixture
def ledger():
    return ResourceLedger({"CPU": 2.0, "GPU": 1.0, "memory": 1000.0})


def test_group_is_placed_at_once_when_it_fits(ledger):
    ledger.create(A, [{"CPU": 1}, {"GPU": 1}], "PACK", "a", None)
    assert ledger.handle("state", A) == "CREATED"
    assert node_free(ledger)["CPU"] == 1.0 and node_free(ledger)["GPU"] == 0.0


def test_pending_groups_are_placed_oldest_first_when_room_frees(ledger):
    ledger.create(A, [{"CPU": 2}])
    ledger.create(B, [{"CPU": 1}])
    ledger.create(C, [{"CPU": 1}])
    assert [ledger.handle("state", g) for g in (A, B, C)] == ["CREATED", "PENDING", "PENDING"]
    ledger.remove(A)
    assert [ledger.handle("state", g) for g in (A, B, C)] == ["REMOVED", "CREATED", "CREATED"]
    assert node_free(ledger)["CPU"] == 0.0


def test_room_freed_by_the_scheduler_is_picked_up_by_place_pending(ledger):
    node_free(ledger)["CPU"] = 0.0  # plain tasks hold every CPU
    ledger.create(A, [{"CPU": 1}])
    assert ledger.handle("state", A) == "PENDING"
    assert not ledger.place_pending()
    node_free(ledger)["CPU"] = 2.0  # they finished
    assert ledger.place_pending()
    assert ledger.handle("state", A) == "CREATED" and node_free(ledger)["CPU"] == 1.0


@pytest.mark.parametrize("bundles, strategy", [
    ([{"CPU": 3}], "PACK"),  # larger than the node
    ([{"TPU": 1}], "PACK"),  # a resource the node lacks
    ([{"CPU": 0.5}, {"CPU": 0.5}], "STRICT_SPREAD"),  # needs two nodes
])
def test_groups_that_can_never_be_placed_stay_pending(ledger, bundles, strategy):
    ledger.create(A, bundles, strategy)
    assert ledger.handle("state", A) == "PENDING"
    assert ledger.table(A)["stats"]["scheduling_state"] == "INFEASIBLE"
    assert not ledger.is_feasible(A, -1, {})
    assert node_free(ledger)["CPU"] == 2.0


def test_single_bundle_strict_spread_is_placed(ledger):
    ledger.create(A, [{"CPU": 1}], "STRICT_SPREAD")
    assert ledger.handle("state", A) == "CREATED"


def test_tasks_take_from_bundles_not_from_the_node(ledger):
    ledger.create(A, [{"CPU": 1}, {"CPU": 0.5}])
    assert ledger.can_acquire(A, -1, {"CPU": 1})
    assert ledger.acquire(A, -1, {"CPU": 1}) == 0
    assert ledger.can_acquire(A, -1, {"CPU": 0.5}) and not ledger.can_acquire(A, 0, {"CPU": 0.5})
    assert ledger.acquire(A, -1, {"CPU": 0.5}) == 1
    assert not ledger.can_acquire(A, -1, {"CPU": 0.1})
    assert ledger.can_acquire(A, -1, {})  # a resource-free request still fits
    assert node_free(ledger)["CPU"] == 0.5  # only the reservation left the node
    assert ledger.members(A) == 2
    ledger.release(A, 0, {"CPU": 1})
    assert ledger.can_acquire(A, 0, {"CPU": 1}) and ledger.members(A) == 1


def test_fractions_add_up_exactly(ledger):
    ledger.create(A, [{"CPU": 0.3}])
    for _ in range(3):
        ledger.acquire(A, 0, {"CPU": 0.1})
    assert not ledger.can_acquire(A, 0, {"CPU": 0.1})


def test_pending_or_unknown_groups_grant_nothing(ledger):
    ledger.create(A, [{"CPU": 3}])
    assert not ledger.can_acquire(A, -1, {})
    assert not ledger.can_acquire(B, -1, {})
    with pytest.raises(ValueError):
        ledger.acquire(A, -1, {})


def test_release_after_removal_is_a_no_op(ledger):
    ledger.create(A, [{"CPU": 1}])
    ledger.acquire(A, 0, {"CPU": 1})
    ledger.remove(A)
    assert node_free(ledger)["CPU"] == 2.0
    ledger.release(A, 0, {"CPU": 1})
    assert node_free(ledger)["CPU"] == 2.0
    ledger.remove(A)  # twice is harmless
    assert ledger.handle("state", A) == "REMOVED"


def test_feasibility(ledger):
    ledger.create(A, [{"CPU": 1}, {"GPU": 1}])
    assert ledger.is_feasible(A, -1, {"GPU": 1})
    assert not ledger.is_feasible(A, 0, {"GPU": 1})
    assert not ledger.is_feasible(A, 5, {})
    assert not ledger.is_feasible(A, -1, {"CPU": 2})


def test_lookup_by_name_and_namespace(ledger):
    ledger.handle("create", (A, [{"CPU": 0.5}], "PACK", "shared", "ns1"))
    ledger.handle("create", (B, [{"CPU": 0.5}], "PACK", "shared", "ns2"))
    assert ledger.handle("by_name", ("shared", "ns1")) == A
    assert ledger.handle("by_name", ("shared", "ns2")) == B
    assert ledger.handle("by_name", ("shared", "ns3")) is None
    ledger.handle("remove", A)
    assert ledger.handle("by_name", ("shared", "ns1")) is None


def test_table_format(ledger):
    ledger.create(A, [{"CPU": 1}, {"memory": 100}], "SPREAD", "t", None)
    ledger.create(B, [{"CPU": 2}])
    entry = ledger.handle("table", A)
    assert entry["placement_group_id"] == A.hex() and entry["name"] == "t" and entry["strategy"] == "SPREAD"
    assert entry["bundles"] == {0: {"CPU": 1.0}, 1: {"memory": 100.0}}
    assert entry["state"] == "CREATED" and entry["stats"]["scheduling_state"] == "FINISHED"
    pending = ledger.handle("table", B)
    assert pending["bundles_to_node_id"] == {0: ""} and pending["stats"]["scheduling_state"] == "NO_RESOURCES"
    assert set(ledger.handle("table", None)) == {A.hex(), B.hex()}
    assert ledger.handle("bundles", A) == [{"CPU": 1.0}, {"memory": 100.0}]


def test_resource_view_uses_rays_names(ledger):
    ledger.create(A, [{"CPU": 1}, {"CPU": 0.5}])
    ledger.acquire(A, 1, {"CPU": 0.5})
    h = A.hex()
    total = ledger.resource_view("total")
    assert total[f"CPU_group_{h}"] == 1.5 and total[f"CPU_group_1_{h}"] == 0.5
    assert total[f"bundle_group_{h}"] == 2000.0 and total[f"bundle_group_0_{h}"] == 1000.0
    free = ledger.resource_view("available")
    assert free[f"CPU_group_{h}"] == 1.0 and f"CPU_group_1_{h}" not in free  # zero entries dropped
    assert free[f"bundle_group_1_{h}"] == pytest.approx(999.999)
    ledger.remove(A)
    assert ledger.resource_view("total") == {}


def test_invalid_requests(ledger):
    with pytest.raises(ValueError):
        ledger.create(A, [{"CPU": 1}], "ANYWHERE")
    ledger.create(A, [{"CPU": 1}])
    with pytest.raises(ValueError):
        ledger.create(A, [{"CPU": 1}])
    with pytest.raises(ValueError):
        ledger.handle("explode", A)
    with pytest.raises(ValueError):
        ledger.handle("bundles", B)


def test_shares_the_schedulers_dicts():
    class Scheduler:
        total = {"CPU": 4.0}
        available = {"CPU": 4.0}
        node_id = b"\x01" * 28

    scheduler = Scheduler()
    ledger = ResourceLedger(scheduler)
    ledger.create(A, [{"CPU": 3}])
    assert scheduler.available["CPU"] == 1.0
    assert ledger.table(A)["bundles_to_node_id"] == {0: (b"\x01" * 28).hex()}
