"""Placement groups on one node: reservation, bundles, pending groups, lookup, removal, strategies.

Every expectation holds on real Ray 2.60; the same test runs on rayreact. The
session has 2 CPUs. Work that must not start yet is observed with a short
``wait`` that must come back empty; work that must run is awaited with a long
deadline.
"""

import pytest

from conftest import backend_fixture, submodule, wait_until

# On rayreact-replay: each scenario creates its placement group and actors afresh, and a new actor
# ends a replay run (the reactor does not yet replay creation), so none is expected to replay.
ray_backend = backend_fixture(replay=True, must_replay=False)


@pytest.fixture
def pgmod(ray_backend):
    return submodule(ray_backend, "util.placement_group")


@pytest.fixture
def strategies(ray_backend):
    return submodule(ray_backend, "util.scheduling_strategies")


@pytest.fixture
def groups(pgmod):
    """Creates groups through ``groups(bundles, ...)`` and removes them after the test."""
    made = []

    def create(bundles, **kwargs):
        pg = pgmod.placement_group(bundles, **kwargs)
        made.append(pg)
        return pg

    yield create
    for pg in made:
        if pgmod.placement_group_table(pg)["state"] != "REMOVED":
            pgmod.remove_placement_group(pg)


def free_cpus(ray):
    return ray.available_resources().get("CPU", 0.0)


def in_group(strategies, pg, index=-1, capture=None):
    return strategies.PlacementGroupSchedulingStrategy(pg, index, capture)


def test_created_group_is_ready_and_reserves_its_bundles(ray_backend, groups):
    wait_until(lambda: free_cpus(ray_backend) == 2.0)
    pg = groups([{"CPU": 1}], name="reserve")
    assert pg.wait(60)
    ready = pg.ready()
    assert isinstance(ready, ray_backend.ObjectRef)
    assert ray_backend.get(ready, timeout=60) == pg
    assert pg.bundle_specs == [{"CPU": 1.0}] and pg.bundle_count == 1
    wait_until(lambda: free_cpus(ray_backend) == 1.0)


def test_group_resources_appear_under_rays_names(ray_backend, groups):
    pg = groups([{"CPU": 1}])
    assert pg.wait(60)
    pg_hex = pg.id.hex()
    wait_until(lambda: ray_backend.cluster_resources().get(f"CPU_group_{pg_hex}") == 1.0)
    assert ray_backend.cluster_resources()[f"CPU_group_0_{pg_hex}"] == 1.0
    wait_until(lambda: ray_backend.available_resources().get(f"CPU_group_{pg_hex}") == 1.0)


def test_tasks_in_a_bundle_use_its_resources(ray_backend, groups, strategies, signal):
    pg = groups([{"CPU": 1}])
    assert pg.wait(60)

    @ray_backend.remote(num_cpus=1)
    def hold(sig):
        ray_backend.get(sig.wait.remote())
        return "done"

    first = hold.options(scheduling_strategy=in_group(strategies, pg, 0)).remote(signal)
    second = hold.options(scheduling_strategy=in_group(strategies, pg)).remote(signal)
    # The bundle holds one CPU: the second task waits for the first although the node has a CPU free.
    ready, _ = ray_backend.wait([first, second], num_returns=2, timeout=0.5)
    assert ready == []
    signal.send.remote()
    assert ray_backend.get([first, second], timeout=60) == ["done", "done"]


def test_group_keeps_reserved_cpus_from_other_work(ray_backend, groups, strategies):
    pg = groups([{"CPU": 2}])
    assert pg.wait(60)

    @ray_backend.remote(num_cpus=1)
    def where():
        return "ran"

    outside = where.remote()
    ready, _ = ray_backend.wait([outside], timeout=0.5)
    assert ready == []  # every CPU is reserved by the group
    inside = where.options(scheduling_strategy=in_group(strategies, pg)).remote()
    assert ray_backend.get(inside, timeout=60) == "ran"
    pgmod = submodule(ray_backend, "util.placement_group")
    pgmod.remove_placement_group(pg)
    assert ray_backend.get(outside, timeout=60) == "ran"


def test_actor_in_a_group(ray_backend, groups, strategies):
    pg = groups([{"CPU": 1}])
    assert pg.wait(60)

    @ray_backend.remote(num_cpus=1)
    class Member:
        def ping(self):
            return "pong"

    member = Member.options(scheduling_strategy=in_group(strategies, pg, 0)).remote()
    assert ray_backend.get(member.ping.remote(), timeout=60) == "pong"
    ray_backend.kill(member)


def test_group_that_does_not_fit_waits_until_room_is_freed(ray_backend, pgmod, groups):
    big = groups([{"CPU": 2}])
    assert big.wait(60)
    small = groups([{"CPU": 1}])
    assert not small.wait(0.5)
    assert pgmod.placement_group_table(small)["state"] == "PENDING"
    pgmod.remove_placement_group(big)
    assert small.wait(60)
    assert pgmod.placement_group_table(small)["state"] == "CREATED"


def test_group_larger_than_the_node_stays_pending(ray_backend, pgmod, groups):
    pg = groups([{"CPU": 3}])
    assert not pg.wait(0.5)
    assert pgmod.placement_group_table(pg)["state"] == "PENDING"


@pytest.mark.parametrize("strategy", ["PACK", "SPREAD", "STRICT_PACK"])
def test_strategies_place_all_bundles_on_the_one_node(ray_backend, pgmod, groups, strategy):
    pg = groups([{"CPU": 1}, {"CPU": 1}], strategy=strategy)
    assert pg.wait(60)
    table = pgmod.placement_group_table(pg)
    assert table["strategy"] == strategy and len(set(table["bundles_to_node_id"].values())) == 1


def test_strict_spread_of_several_bundles_cannot_be_placed_on_one_node(ray_backend, pgmod, groups):
    pg = groups([{"CPU": 0.5}, {"CPU": 0.5}], strategy="STRICT_SPREAD")
    assert not pg.wait(0.5)
    assert pgmod.placement_group_table(pg)["state"] == "PENDING"
    single = groups([{"CPU": 0.5}], strategy="STRICT_SPREAD")
    assert single.wait(60)


def test_table_describes_groups(ray_backend, pgmod, groups):
    pg = groups([{"CPU": 1}, {"CPU": 0.5}], name="described", strategy="SPREAD")
    assert pg.wait(60)
    entry = pgmod.placement_group_table(pg)
    assert entry["placement_group_id"] == pg.id.hex()
    assert entry["name"] == "described" and entry["strategy"] == "SPREAD" and entry["state"] == "CREATED"
    assert entry["bundles"] == {0: {"CPU": 1.0}, 1: {"CPU": 0.5}}
    assert pg.id.hex() in pgmod.placement_group_table()


def test_get_placement_group_by_name(ray_backend, pgmod, groups):
    pg = groups([{"CPU": 0.5}], name="findable")
    found = pgmod.get_placement_group("findable")
    assert found == pg and found.bundle_specs == [{"CPU": 0.5}]
    with pytest.raises(ValueError):
        pgmod.get_placement_group("no-such-group")
    with pytest.raises(ValueError):
        pgmod.get_placement_group("")


def test_removed_group_returns_its_resources(ray_backend, pgmod, groups):
    wait_until(lambda: free_cpus(ray_backend) == 2.0)
    pg = groups([{"CPU": 1}, {"CPU": 1}])
    assert pg.wait(60)
    wait_until(lambda: free_cpus(ray_backend) == 0.0)
    pgmod.remove_placement_group(pg)
    assert pgmod.placement_group_table(pg)["state"] == "REMOVED"
    wait_until(lambda: free_cpus(ray_backend) == 2.0)
    with pytest.raises(Exception, match="does not exist"):
        pg.wait(1)


def test_removing_a_group_kills_its_actors(ray_backend, pgmod, groups, strategies):
    pg = groups([{"CPU": 1}])
    assert pg.wait(60)

    @ray_backend.remote
    class Member:
        def ping(self):
            return "pong"

    member = Member.options(scheduling_strategy=in_group(strategies, pg)).remote()
    assert ray_backend.get(member.ping.remote(), timeout=60) == "pong"
    pgmod.remove_placement_group(pg)

    def dead():
        try:
            ray_backend.get(member.ping.remote(), timeout=60)
            return False
        except ray_backend.exceptions.RayActorError:
            return True

    wait_until(dead)  # Ray kills the group's actors asynchronously


def test_current_placement_group(ray_backend, pgmod, groups, strategies):
    pg = groups([{"CPU": 1}])
    assert pg.wait(60)

    @ray_backend.remote(num_cpus=1)
    def current():
        return pgmod.get_current_placement_group()

    assert pgmod.get_current_placement_group() is None  # the driver is in no group
    assert ray_backend.get(current.options(scheduling_strategy=in_group(strategies, pg)).remote(), timeout=60) == pg
    assert ray_backend.get(current.remote(), timeout=60) is None


def test_child_tasks_are_captured_only_when_asked(ray_backend, pgmod, groups, strategies):
    pg = groups([{"CPU": 1}])
    assert pg.wait(60)

    @ray_backend.remote(num_cpus=0)
    def child():
        return pgmod.get_current_placement_group()

    @ray_backend.remote(num_cpus=1)
    def parent():
        return ray_backend.get(child.remote())

    captured = parent.options(scheduling_strategy=in_group(strategies, pg, -1, True)).remote()
    assert ray_backend.get(captured, timeout=60) == pg
    free = parent.options(scheduling_strategy=in_group(strategies, pg)).remote()
    assert ray_backend.get(free, timeout=60) is None


def test_requests_that_cannot_fit_the_group_fail_at_submission(ray_backend, groups, strategies):
    pg = groups([{"CPU": 1}])

    @ray_backend.remote(num_cpus=2)
    def too_big():
        return 1

    @ray_backend.remote(num_cpus=1)
    def fits():
        return 1

    with pytest.raises(ValueError):
        too_big.options(scheduling_strategy=in_group(strategies, pg)).remote()
    with pytest.raises(ValueError):
        fits.options(scheduling_strategy=in_group(strategies, pg, 1)).remote()


def test_the_refusal_names_the_function_or_class_by_its_qualified_name(ray_backend, groups, strategies):
    pg = groups([{"CPU": 1}])

    @ray_backend.remote(num_cpus=2)
    def too_big():
        return 1

    @ray_backend.remote(num_cpus=1, num_gpus=8)
    class TooBig:
        pass

    where = "test_the_refusal_names_the_function_or_class_by_its_qualified_name.<locals>"
    with pytest.raises(ValueError, match=rf"^Cannot schedule {where}\.too_big with the placement group because "
                                         r"the resource request \{'CPU': 2\} cannot fit"):
        too_big.options(scheduling_strategy=in_group(strategies, pg)).remote()
    with pytest.raises(ValueError, match=rf"^Cannot schedule {where}\.TooBig with the placement group because "
                                         r"the resource request \{'CPU': 1, 'GPU': 8\} cannot fit"):
        TooBig.options(scheduling_strategy=in_group(strategies, pg)).remote()


@pytest.mark.parametrize("bundles, kwargs", [
    ([], {}),
    ({"CPU": 1}, {}),
    ([{}], {}),
    ([{"CPU": 0}], {}),
    ([{"CPU": "1"}], {}),
    ([{"CPU": 1}], {"strategy": "ANYWHERE"}),
    ([{"CPU": 1}], {"lifetime": "forever"}),
    ([{"CPU": 1}], {"strategy": "PACK", "topology_strategy": {"ray.io/node-id": "PACK"}}),
    ([{"CPU": 1}], {"bundle_label_selector": [{}, {}]}),
])
def test_invalid_groups_are_refused(ray_backend, pgmod, bundles, kwargs):
    with pytest.raises(ValueError):
        pgmod.placement_group(bundles, **kwargs)


def test_empty_group(ray_backend, pgmod):
    empty = pgmod.PlacementGroup.empty()
    assert empty.is_empty
    assert ray_backend.get(empty.ready(), timeout=60) == empty


def test_node_affinity_to_this_node(ray_backend, strategies):
    node_id = ray_backend.get_runtime_context().get_node_id()

    @ray_backend.remote
    def here():
        return "here"

    strategy = strategies.NodeAffinitySchedulingStrategy(node_id, soft=False)
    assert ray_backend.get(here.options(scheduling_strategy=strategy).remote(), timeout=60) == "here"
    assert ray_backend.get(here.options(scheduling_strategy="SPREAD").remote(), timeout=60) == "here"


def test_scheduling_strategy_records(strategies):
    pgs = strategies.PlacementGroupSchedulingStrategy(None)
    assert (pgs.placement_group, pgs.placement_group_bundle_index, pgs.placement_group_capture_child_tasks) == (
        None, -1, None)
    with pytest.raises(ValueError):
        strategies.NodeAffinitySchedulingStrategy("not-hex", soft=True)
    with pytest.raises(ValueError):
        strategies.NodeAffinitySchedulingStrategy("ab" * 28, soft=False, _spill_on_unavailable=True)
    with pytest.raises(ValueError):
        strategies.NodeLabelSchedulingStrategy({})
    label = strategies.NodeLabelSchedulingStrategy({"zone": strategies.In("a", "b")}, soft={"gpu": strategies.Exists()})
    assert [e.key for e in label.hard] == ["zone"] and label.hard[0].operator.values == ["a", "b"]
    with pytest.raises(ValueError):
        strategies.In()
