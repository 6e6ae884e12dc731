"""The local engine: verl 0.9.1 on CPU, loaded through VERL_USE_EXTERNAL_MODULES.

verl imports the modules named in VERL_USE_EXTERNAL_MODULES in every process it starts (driver,
TaskRunner, workers, rollout servers). Importing this package there registers a `cpu` platform, an
`hf` rollout (transformers generate in a Ray actor) and a shim for a hard-coded CUDA assumption
(shims.py).
No verl source file is edited; everything here is tied to verl==0.9.1 and re-validated by the local
study whenever verl is upgraded.
"""

from .. import hooks  # noqa: F401  (the affinity hook and the rollout's memory record, as on GPU sites)
from . import hf_server, platform, rollout, shims  # noqa: F401  (registration happens on import)

shims.install()
rollout.register()
hooks.measure_sleep_and_wake(hf_server.HFGenerationServer)
