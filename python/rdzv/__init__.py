"""rdzv's Python side: torchrun's rendezvous backend `rdzv` (rdzv.torchrun).

The package's path is extended with every `rdzv` folder on sys.path, so
that modules generated from proto/ (`rdzv.v1`, in a build folder) import
beside an installed copy of this package.
"""

from pkgutil import extend_path

__path__ = extend_path(__path__, __name__)

__version__ = "0.1.0"
