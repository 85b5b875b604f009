/* completion bash: the shell completion script, for eval or a file of the user's. */
#include <stdio.h>
#include <string.h>

#include "cmd.h"
#include "completion.h"

int cmd_completion(struct cmd_ctx *c)
{
	if (strcmp(c->args.argv[0], "bash") != 0)
		return cmd_usage("completion: no script for shell \"%s\" (only bash)",
		                 c->args.argv[0]);
	fputs(ofcctl_completion_bash, stdout);
	return CMD_OK;
}
