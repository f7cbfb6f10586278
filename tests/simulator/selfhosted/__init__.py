"""Self-hosted edition conformance: the spec's 25 endpoints over real HTTP, values from truth.

Every expectation is computed from the simulator's ground truth (`sim.truth(...)`,
`sim.info()`), never from the API under test; the README's "Choices where the spec is silent"
fix what the spec leaves open (CSV header, `nextPageStart` absent on the last page, ...).
"""
