"""Ways to start a run. The top layer: nothing in the package imports it.

- ``cli``: ``grpo-lite demo | train | score | plan | launch-kit``
- ``recipe``: a run YAML -> load, prepare, train
- ``kit``: the run YAML plus accelerate configs and launch commands for more GPUs
- ``demo``: the offline demos on the shipped arithmetic and picture models
"""
