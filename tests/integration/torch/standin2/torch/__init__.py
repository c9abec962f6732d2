"""A stand-in for torch 2.x's API shape where bench/torch_rdzv.py and the
tests touch it (torch 2.x is not installable on Debian 12): only what those
callers use, with torch 2.x's signatures, so that code written against
torch 1.13's shape fails here as it fails on torch 2.x. Nothing of torch's
is copied; the behaviour is the least that lets a rendezvous complete in one
process. Put its parent folder first on PYTHONPATH."""

__version__ = "2.11.0+standin"
