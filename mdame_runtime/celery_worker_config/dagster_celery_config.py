"""The Celery settings of a worker that `mdame celery-worker` starts.

dagster_celery.app's make_app imports a top-level module of this name when one is importable
(the worker's PYTHONPATH names this folder). The settings are the celery executor's own
(mdame_runtime.executors), the broker and backend URLs read from the environment as the worker
starts: nothing is written to disk, where `dagster-celery worker start` would write the
resolved URLs (passwords included) into a file under DAGSTER_HOME.
"""

from mdame_runtime.executors import celery_worker_settings

globals().update(celery_worker_settings())
# Only settings stay in the module: Celery reads every name in it as one.
del celery_worker_settings
