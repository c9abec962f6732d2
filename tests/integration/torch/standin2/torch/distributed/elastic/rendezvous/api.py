"""The result types of torch >= 2.4's RendezvousHandler.next_rendezvous()."""


class RendezvousStoreInfo:
    def __init__(self, master_addr, master_port):
        self.master_addr, self.master_port = master_addr, master_port


class RendezvousInfo:
    """Not a tuple: torch 1.13-style unpacking of it fails."""

    def __init__(self, store, rank, world_size, bootstrap_store_info):
        self._store, self._rank, self._world_size = store, rank, world_size
        self._bootstrap_store_info = bootstrap_store_info

    store = property(lambda self: self._store)
    rank = property(lambda self: self._rank)
    world_size = property(lambda self: self._world_size)
    bootstrap_store_info = property(lambda self: self._bootstrap_store_info)
