"""Cloud edition conformance: the spec's 11 endpoints over real HTTP, checked against truth.

Every expected value is computed here from the simulator's ground truth (`/_sim/truth`,
`info()["now"]`) and the spec, never from simulator code.
"""
