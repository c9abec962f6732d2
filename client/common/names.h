/*
 * The names rdzv-agent and rdzvctl print for the protocol's job, node and
 * hook-run states: lower case, as in SPEC §4 and the documentation.
 */
#ifndef RDZV_NAMES_H
#define RDZV_NAMES_H

/* An rdzv.v1.JobState; "unknown" for a value this build does not know. */
const char	*job_state_name(int state);
/* An rdzv.v1.NodeState; "unknown" likewise. */
const char	*node_state_name(int state);
/* An rdzv.v1.HookRunState ("queued", "running", "exited", ...). */
const char	*hook_state_name(int state);

#endif
