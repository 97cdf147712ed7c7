"""``ray.cluster_utils``: multi-node test clusters.  rayreact is one node; tests that
build a ``Cluster`` are on the skip list (multiple nodes)."""

cluster_not_supported = True


class Cluster:
    def __init__(self, *args, **kwargs):
        raise NotImplementedError("ray.cluster_utils.Cluster starts extra Ray nodes; rayreact runs on one machine")


class AutoscalingCluster(Cluster):
    pass
