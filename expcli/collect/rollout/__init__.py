"""Ray rollout actors: each steps its slice of the envs with its own copy of the policy.

``rollout_actor`` (one actor's envs, policy and stepper), ``rollout_fleet`` (the actors and
their calls), ``rollout_collector`` (their chunks into the run's memory) and
``rollout_job`` (when a collect run uses them, and building the fleet). Imported only
when a run uses Ray.
"""
