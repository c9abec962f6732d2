"""C10dRendezvousBackend(store, run_id), stood in for."""


class C10dRendezvousBackend:
    name = "c10d"

    def __init__(self, store, run_id):
        self.store, self.run_id = store, run_id
