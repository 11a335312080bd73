"""Ray rollout actors: each steps its slice of the envs with its own copy of the policy.

``actor`` (one actor's envs, policy and stepper), ``fleet`` (the actors and
their calls), ``collector`` (their chunks into the run's memory) and
``job`` (when a collect run uses them, and building the fleet). Imported only
when a run uses Ray.
"""
