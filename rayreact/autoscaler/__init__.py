"""``ray.autoscaler``: on one node there is nothing to scale; ``sdk.request_resources`` is accepted."""
