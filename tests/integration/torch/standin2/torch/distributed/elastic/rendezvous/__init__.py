"""torch.distributed.elastic.rendezvous, stood in for."""
