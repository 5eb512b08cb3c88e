"""What runs the Dagster definitions, below them: the step runtime every stage runs in
(step.py), the executors and IO manager that place steps (executors.py), the warm run server
and its run launcher, the liveness sweep, a run's outcome in mdame.pipeline_runs, the Celery
workers' settings, and the partition keys a step reads. It may import mdame_pipeline and the
packages below it, never mdame_assets: the definitions import it."""
