"""The draft gate: deterministic checks and repairs over the criteria's rules, org memory, the judge, and the merge."""
