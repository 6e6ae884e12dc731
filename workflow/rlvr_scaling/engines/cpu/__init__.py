"""The local engine: verl 0.9.1 on CPU, loaded through VERL_USE_EXTERNAL_MODULES.

verl imports the modules named in VERL_USE_EXTERNAL_MODULES in every process it starts (driver,
TaskRunner, workers, rollout servers). Importing this package there registers a `cpu` platform and a
shim for a hard-coded CUDA assumption (shims.py), and the `hf` rollout (transformers generate in a
Ray actor) once the process imports verl's rollout registries: a process that never builds a rollout
(the transfer queue's, the reward loop's) does not pay for importing them (benchmarks/local_run.py).
No verl source file is edited; everything here is tied to verl==0.9.1 and re-validated by the local
study whenever verl is upgraded.
"""

from .. import hooks
from . import hf_server, platform, shims  # noqa: F401  (registration happens on import)

shims.install()
hooks.measure_sleep_and_wake(hf_server.HFGenerationServer)

_registered: list[bool] = []


def _register_rollout(_module: object) -> None:
    if _registered:
        return
    _registered.append(True)
    from . import rollout

    rollout.register()


# Whichever of verl's two rollout registries a process imports first (the adapter's, the replica's).
for _name in ("verl.workers.rollout.base", "verl.workers.rollout.replica"):
    hooks.after_import(_name, _register_rollout)
