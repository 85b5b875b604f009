/*
 * ofcd-agent — the host agent of the optical fabric controller.
 *
 *   ofcd-agent -c FILE                 run until SIGTERM or SIGINT (agent.c)
 *   ofcd-agent -c FILE --check-config  validate FILE and exit 0 (valid) or 1
 *   ofcd-agent --dump-config-doc       print the configuration reference (markdown)
 *
 * Exit status: 0 after a signal or a valid --check-config, 1 for a bad
 * configuration or a start failure, 2 for bad arguments.
 */
#include <getopt.h>
#include <stdbool.h>
#include <stdio.h>

#include "agent.h"
#include "log.h"
#include "secret_file.h"
#include "version.h"

static void usage(FILE *f)
{
	fprintf(f, "usage: ofcd-agent -c FILE [--check-config]\n"
	           "  -c, --config FILE   agent configuration (INI, section [agent])\n"
	           "      --check-config  validate the configuration and exit 0 or 1\n"
	           "      --dump-config-doc  print every configuration key as a markdown table\n"
	           "  -V, --version       print the version\n"
	           "  -h, --help          this text\n");
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "config", required_argument, NULL, 'c' },
		{ "check-config", no_argument, NULL, 'C' },
		{ "dump-config-doc", no_argument, NULL, 'G' },
		{ "version", no_argument, NULL, 'V' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	const char *path = NULL;
	bool check = false;
	struct agent_config cfg;
	char err[768];
	int c;

	while ((c = getopt_long(argc, argv, "c:Vh", opts, NULL)) != -1) {
		switch (c) {
		case 'c':
			path = optarg;
			break;
		case 'C':
			check = true;
			break;
		case 'G':
			cfgtab_doc(&agent_config_table, stdout);
			return 0;
		case 'V':
			printf("ofcd-agent %s\n", OFCD_VERSION);
			return 0;
		case 'h':
			usage(stdout);
			return 0;
		default:
			usage(stderr);
			return 2;
		}
	}
	if (optind < argc) {
		fprintf(stderr, "ofcd-agent: unexpected argument \"%s\"\n", argv[optind]);
		usage(stderr);
		return 2;
	}
	if (!path) {
		fprintf(stderr, "ofcd-agent: -c FILE is required\n");
		usage(stderr);
		return 2;
	}
	if (agent_config_load(path, &cfg, err, sizeof(err)) < 0) {
		fprintf(stderr, "ofcd-agent: %s\n", err);
		agent_config_free(&cfg);
		return 1;
	}
	char msg[1024];
	if (cfg.token[0] && secret_file_exposed(path, "the agent's token", msg, sizeof(msg)))
		log_warn("config", "%s", msg);
	if (check) {
		printf("%s: configuration is valid\n", path);
		agent_config_free(&cfg);
		return 0;
	}
	int rc = agent_run(&cfg);
	agent_config_free(&cfg);
	return rc == 0 ? 0 : 1;
}
