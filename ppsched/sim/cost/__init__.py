"""Ground-truth cost model of the simulator (measured A100 profiles, scaled; see COST_MODEL.md)."""

from ppsched.sim.cost.model import CostModel, build_cost_model, split_layers

__all__ = ["CostModel", "build_cost_model", "split_layers"]
