/*
 * The election on etcd (SPEC §14). Until the etcd store is built in, the
 * store is SQLite's and there is nothing to campaign for.
 */
#include <stddef.h>
#include <stdio.h>

#include "ha.h"
#include "log.h"
#include "rdzvd.h"

void
ha_elect_start(void)
{
	fatalx("no etcd store: nothing to campaign for");
}

void
ha_elect_again(void)
{
}

void
ha_elect_stop(void)
{
}

int
ha_store_is_etcd(void)
{
	return 0;
}

const char *
ha_etcd_endpoint(size_t i)
{
	return "";
}

void
ha_store_text(char *buf, size_t len)
{
	snprintf(buf, len, "sqlite:%s", rdzvd.cfg.db);
}

void
ha_elect_free(void)
{
}
