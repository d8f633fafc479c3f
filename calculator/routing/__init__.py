"""Load balancing and request routing (section 10.11).

Fan-out tails and their per-leaf budget, balls-into-bins maximum load for random and d-choice
placement (closed form and seeded simulation), capacity-weighted routing, the power-of-two-choices
router of Algorithm 4, a consistent-hash ring with virtual nodes, the KV-migration
transfer-or-rebuild decision, a circuit breaker driven by a request trace, and retry amplification
under overload.
"""

from __future__ import annotations

from .tails import (
    SIMULATED_POLICIES,
    BreakerTrace,
    CircuitBreaker,
    CircuitBreakerConfig,
    ConsistentHashRing,
    KvMigration,
    MaxLoadSimulation,
    PolicyComparison,
    RetryEquilibrium,
    RoutingDecision,
    RoutingShares,
    compare_routing_policies,
    expected_max_load,
    fanout_slow_probability,
    inverse_latency_weights,
    kv_migration,
    least_connections,
    max_load_order,
    per_leaf_budget,
    probe_hit_probability,
    remap_fraction_on_add,
    remap_fraction_on_remove,
    remapped_fraction,
    retry_amplification,
    retry_equilibrium,
    route_two_choices,
    routing_shares,
    simulate_circuit_breaker,
    simulate_max_load,
    tail_event_rate,
    wasted_token_fraction,
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
