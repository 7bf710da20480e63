"""A simulated fleet: N replicas of the simulated engine behind a model of sglang-router.

``routers`` models the router's policies (random, round_robin, cache_aware, power_of_two) as
sglang-router 0.3.2 defines them; ``prefix_tree`` is cache_aware's per-worker prefix index over a
trace's prefix block ids; ``simulate_fleet`` runs one event loop over every replica (each with its
own controller), the replicas interacting only through the router's view of their load;
``capacity`` answers ``ppsched plan``: the least number of boxes that sustains a rate.
"""
