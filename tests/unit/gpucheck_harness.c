/*
 * The GPU check's unit tests' shared cases and checks (gpucheck_harness.h).
 */
#include <sys/wait.h>

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "gpucheck_harness.h"

void
in_child(const char *what, void (*fn)(void), ...)
{
	va_list		 ap;
	const char	*e;
	char		 name[128];
	pid_t		 pid;
	int		 status;

	fflush(NULL);
	pid = fork();
	if (pid == -1) {
		perror("fork");
		check_failures++;
		return;
	}
	if (pid == 0) {
		check_failures = 0;
		unsetenv("FAKECUDA_DEVICES");
		unsetenv("FAKECUDA_FAIL");
		unsetenv("FAKECUDA_MISMATCH");
		unsetenv("FAKECUDA_HANG");
		unsetenv("FAKECUDA_CRASH");
		unsetenv("FAKECUDA_STATE");
		unsetenv("FAKECUDA_SMS");
		unsetenv("FAKECUDA_DEAD_SM");
		unsetenv("CUDA_VISIBLE_DEVICES");
		unsetenv("RDZV_GPUCHECK_BYTES");
		unsetenv("RDZV_HEALTH_BYTES");
		va_start(ap, fn);
		while ((e = va_arg(ap, const char *)) != NULL) {
			const char *eq = strchr(e, '=');

			if (eq == NULL) {
				unsetenv(e);
				continue;
			}
			snprintf(name, sizeof name, "%.*s", (int)(eq - e), e);
			setenv(name, eq + 1, 1);
		}
		va_end(ap);
		fn();
		fflush(NULL);
		/* exit(), not _exit(): LeakSanitizer checks the child. */
		exit(check_failures != 0 ? 1 : 0);
	}
	check_count++;
	while (waitpid(pid, &status, 0) == -1 && errno == EINTR)
		;
	if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
		fprintf(stderr, "case '%s' failed (status 0x%x)\n", what,
		    status);
		check_failures++;
	}
}

void
check_failed(const struct gpucheck_result *r, const char *step,
    const char *error)
{
	CHECK(!r->ok);
	CHECK_STR(r->failed_step, step);
	CHECK_STR(r->error, error);
	CHECK(r->n_steps > 0);
	if (r->n_steps > 0)
		CHECK_STR(r->steps[r->n_steps - 1].name, step);
}
