"""The answers: the four questions per regime for the case study, one box's decision from its own numbers, the plan
that checks it, each in words formatted from the values that compute them."""
