"""Load balancing and request routing (section 10.11).

Fan-out tails and their per-leaf budget, balls-into-bins maximum load for random and d-choice
placement (closed form and seeded simulation), capacity-weighted routing, the power-of-two-choices
router of Algorithm 4, a consistent-hash ring with virtual nodes, the KV-migration
transfer-or-rebuild decision, a circuit breaker driven by a request trace, and retry amplification
under overload.

The submodules, each re-exported here:

* :mod:`~calculator.routing.tails`: fan-out tails (10.11.1) and balls into bins (Theorem 10.2).
* :mod:`~calculator.routing.policies`: weighted and adaptive routing, two choices (10.11.4), least
  connections (10.11.5) and :func:`compare_routing_policies`.
* :mod:`~calculator.routing.hashing`: consistent hashing (10.11.6) and KV-cache migration (10.11.8).
* :mod:`~calculator.routing.resilience`: the circuit breaker (10.11.10) and retries under overload.
"""

from __future__ import annotations

from .hashing import (
    ConsistentHashRing,
    KvMigration,
    kv_migration,
    remap_fraction_on_add,
    remap_fraction_on_remove,
    remapped_fraction,
)
from .policies import (
    SIMULATED_POLICIES,
    PolicyComparison,
    RoutingDecision,
    RoutingShares,
    compare_routing_policies,
    inverse_latency_weights,
    least_connections,
    route_two_choices,
    routing_shares,
)
from .resilience import (
    BreakerTrace,
    CircuitBreaker,
    CircuitBreakerConfig,
    RetryEquilibrium,
    retry_amplification,
    retry_equilibrium,
    simulate_circuit_breaker,
    wasted_token_fraction,
)
from .tails import (
    MaxLoadSimulation,
    expected_max_load,
    fanout_slow_probability,
    max_load_order,
    per_leaf_budget,
    probe_hit_probability,
    simulate_max_load,
    tail_event_rate,
)

__all__ = [
    "tail_event_rate",
    "fanout_slow_probability",
    "per_leaf_budget",
    "probe_hit_probability",
    "max_load_order",
    "expected_max_load",
    "MaxLoadSimulation",
    "simulate_max_load",
    "RoutingShares",
    "routing_shares",
    "inverse_latency_weights",
    "RoutingDecision",
    "route_two_choices",
    "least_connections",
    "SIMULATED_POLICIES",
    "PolicyComparison",
    "compare_routing_policies",
    "remap_fraction_on_add",
    "remap_fraction_on_remove",
    "ConsistentHashRing",
    "remapped_fraction",
    "KvMigration",
    "kv_migration",
    "CircuitBreakerConfig",
    "CircuitBreaker",
    "BreakerTrace",
    "simulate_circuit_breaker",
    "retry_amplification",
    "RetryEquilibrium",
    "retry_equilibrium",
    "wasted_token_fraction",
]
