/*
 * rdzv-agent: one per node per job. Subcommands, tmux style: each lives in
 * a file of its own and is listed in the table below.
 */
#include <signal.h>
#include <stdio.h>
#include <string.h>

#include "agent.h"
#include "log.h"

struct cmd_entry {
	const char	*name;
	const char	*usage;
	int		(*fn)(int, char **);
};

static const struct cmd_entry cmds[] = {
	{ "join", "join --id ID [options] -- CMD [ARGS...]\n"
	    "        join a job and run its workers on this node",
	    cmd_join },
	{ "gpucheck", "gpucheck [--device N|all] [-o json]\n"
	    "        check this node's GPUs by hand",
	    cmd_gpucheck },
};

static void
usage(FILE *f)
{
	fprintf(f, "usage: rdzv-agent COMMAND [options]\n\ncommands:\n");
	for (size_t i = 0; i < sizeof(cmds) / sizeof(cmds[0]); i++)
		fprintf(f, "  %s\n", cmds[i].usage);
	fprintf(f, "\n`rdzv-agent COMMAND --help` describes a command's "
	    "options.\n");
}

int
main(int argc, char **argv)
{
	log_init("rdzv-agent", LOG_LEVEL_INFO);
	/* lib/grpc.h: writes to a closed peer must not kill us. */
	signal(SIGPIPE, SIG_IGN);

	if (argc < 2) {
		usage(stderr);
		return AGENT_EXIT_USAGE;
	}
	if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0 ||
	    strcmp(argv[1], "help") == 0) {
		usage(stdout);
		return 0;
	}
	if (strcmp(argv[1], "--version") == 0 ||
	    strcmp(argv[1], "version") == 0) {
		printf("rdzv-agent %s\n", RDZV_VERSION);
		return 0;
	}
	for (size_t i = 0; i < sizeof(cmds) / sizeof(cmds[0]); i++) {
		if (strcmp(argv[1], cmds[i].name) == 0)
			return cmds[i].fn(argc - 1, argv + 1);
	}
	fprintf(stderr, "rdzv-agent: unknown command '%s'; try "
	    "'rdzv-agent --help'\n", argv[1]);
	return AGENT_EXIT_USAGE;
}
