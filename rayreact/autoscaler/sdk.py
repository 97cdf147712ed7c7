"""``ray.autoscaler.sdk``: the part of Ray's autoscaler API a script calls from inside a session.

On one machine the cluster is the node: ``request_resources`` checks its arguments as Ray does
and then does nothing (Ray's autoscaler would start nodes until the request fits).  The cluster
launcher's functions (``create_or_update_cluster``, ``teardown_cluster``, ...) manage cloud
machines and are out of scope.
"""

from __future__ import annotations


def request_resources(num_cpus: int | None = None, bundles: list | None = None,
                      bundle_label_selectors: list | None = None) -> None:
    """Ask the autoscaler to scale to fit ``num_cpus`` or ``bundles``: a no-op on one node."""
    if num_cpus is not None and not isinstance(num_cpus, int):
        raise TypeError("num_cpus should be of type int.")
    if bundles is not None:
        if not isinstance(bundles, list) or not all(isinstance(b, dict) for b in bundles):
            raise TypeError("bundles should be of type List")
        for bundle in bundles:
            for key, value in bundle.items():
                if not isinstance(key, str) or not isinstance(value, (int, float)):
                    raise TypeError("each bundle should be a Dict[str, int or float].")
    if bundle_label_selectors is not None:
        if bundles is None or len(bundle_label_selectors) != len(bundles):
            raise ValueError("bundle_label_selectors must be a list of the same length as bundles.")
    from .. import is_initialized
    if not is_initialized():
        raise RuntimeError("Ray is not initialized yet")
