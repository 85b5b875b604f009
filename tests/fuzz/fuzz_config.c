/*
 * The INI configuration of both programs, through their in-memory loaders
 * (config_load_string, agent_config_load_string: the same engine and table as
 * a file). A refusal must say why; the daemon's accepted file is then applied
 * as SIGHUP applies one (changed fixed keys named, live keys swapped), and
 * every configuration is released (LeakSanitizer watches the tokens).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agent.h"
#include "base/config.h"
#include "fuzz.h"

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	log_set_level(LOG_LVL_ERROR);
	return 0;
}

static void check(bool ok, const char *what)
{
	if (!ok) {
		fprintf(stderr, "fuzz_config: %s\n", what);
		abort();
	}
}

static void daemon_config(const char *text)
{
	struct ofcd_config running, next;
	char err[768] = "", fixed[256];

	if (config_load_string(text, "fuzz.ini", &next, err, sizeof(err)) < 0) {
		check(strncmp(err, "fuzz.ini", 8) == 0, "a refusal that does not name the file");
		config_free(&next);
		return;
	}
	check(config_defaults(&running, err, sizeof(err)) == 0, "defaults refused");
	cfgtab_changed_fixed(&config_table, &running, &next, fixed, sizeof(fixed));
	cfgtab_swap_live(&config_table, &running, &next);
	config_free(&next);
	config_free(&running);
}

static void agent_config(const char *text)
{
	struct agent_config cfg;
	char err[768] = "";

	if (agent_config_load_string(text, "fuzz.ini", &cfg, err, sizeof(err)) < 0)
		check(strncmp(err, "fuzz.ini", 8) == 0, "a refusal that does not name the file");
	else
		check(cfg.server[0] && cfg.ncontrollers >= 1 &&
		          cfg.ncontrollers <= AGENT_CONTROLLERS_MAX && cfg.controllers[0].host[0] &&
		          cfg.controllers[cfg.ncontrollers - 1].port,
		      "accepted without its required keys");
	agent_config_free(&cfg);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *text = malloc(size + 1);

	if (!text)
		return 0;
	memcpy(text, data, size);
	text[size] = '\0';
	daemon_config(text);
	agent_config(text);
	free(text);
	return 0;
}
