"""rdzv's Python side: torchrun's rendezvous backend `rdzv` (rdzv.torchrun),
rdzv.progress(step), with which workers tell their rdzv-agent how far
training got (docs/HEALTH.md), and rdzv.elastic, which restarts a training
function in its process after a node loss (docs/RECOVERY.md).

The package's path is extended with every `rdzv` folder on sys.path, so
that modules generated from proto/ (`rdzv.v1`, in a build folder) import
beside an installed copy of this package.
"""

from pkgutil import extend_path

__path__ = extend_path(__path__, __name__)

__version__ = "0.1.0"

from rdzv.progress import progress  # noqa: E402

__all__ = ["progress"]
