/*
 * The election on etcd (SPEC §14; ha_elect.c): one campaign at a time,
 * whose outcomes go to the caller through struct ha_elect_events.
 */
#ifndef RDZVD_HA_ELECT_H
#define RDZVD_HA_ELECT_H

/* What the election tells its caller (ha.c), which decides. */
struct ha_elect_events {
	/* Our key leads and the store is fenced with it: lead. 0, or -1
	 * with a message (the election then lets another replica try). */
	int	(*won)(char *err, size_t errlen);
	/* We lead no more (the lease is lost, our key is gone): stop
	 * serving at once. The election campaigns again when told to. */
	void	(*lost)(const char *why);
};

/* Starts campaigning (an etcd store only); |ev| is kept. */
void		 ha_elect_start(const struct ha_elect_events *ev);
/* Campaigns again after stepping down. */
void		 ha_elect_again(void);
/* While leading: the advertised address of the replica whose key comes
 * after ours, which leads when we no longer do ("": none known). */
const char	*ha_elect_successor(void);
/* 1 once the first campaign has an outcome (or failed). */
int		 ha_elect_settled(void);
/* Campaigns no more; revokes our lease. */
void		 ha_elect_stop(void);
/* ha_elect_stop(), then frees the client (after the event loop). */
void		 ha_elect_free(void);

#endif
