"""Pure statement analysis: what a statement would change, and what policy says about it."""
