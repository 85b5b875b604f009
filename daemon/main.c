/*
 * ofcd — optical fabric controller daemon.
 *
 *   ofcd [-c FILE] [--demo]     run the controller
 *   ofcd -c FILE --check-config validate FILE and exit 0 (valid) or 1
 *   ofcd --dump-config-doc      print the configuration reference (markdown)
 *
 * The host agent is its own program, ofcd-agent (agent/main.c).
 */
#include <getopt.h>
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>

#include "base/config.h"
#include "log.h"
#include "ofcd.h"

static void usage(FILE *f)
{
	fprintf(f, "usage: ofcd [-c FILE] [--check-config] [--demo]\n"
	           "  -c, --config FILE   configuration file (INI); built-in defaults without it\n"
	           "      --check-config  validate the configuration and exit 0 or 1\n"
	           "      --demo          load a demo topology into an empty store\n"
	           "      --dump-config-doc  print every configuration key as a markdown table\n"
	           "  -V, --version       print the version\n"
	           "  -h, --help          this text\n");
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "config", required_argument, NULL, 'c' },
		{ "check-config", no_argument, NULL, 'C' },
		{ "demo", no_argument, NULL, 'D' },
		{ "dump-config-doc", no_argument, NULL, 'G' },
		{ "version", no_argument, NULL, 'V' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	const char *path = NULL;
	bool check = false, demo = false;
	int c;

	/*
	 * Views of a few MB are built and freed on every large GET. glibc's
	 * threshold for mapping a block of its own follows the largest block
	 * freed, and its heap gives back what is free at its top past twice
	 * that: at 32,768 servers each GET /v1/topology mapped, faulted in and
	 * unmapped its text again (48 ms against 26). Fixed thresholds keep up
	 * to 64 MiB free for the next request.
	 */
	mallopt(M_MMAP_THRESHOLD, 32 << 20);
	mallopt(M_TRIM_THRESHOLD, 64 << 20);

	while ((c = getopt_long(argc, argv, "c:Vh", opts, NULL)) != -1) {
		switch (c) {
		case 'c':
			path = optarg;
			break;
		case 'C':
			check = true;
			break;
		case 'D':
			demo = true;
			break;
		case 'G':
			cfgtab_doc(&config_table, stdout);
			return 0;
		case 'V':
			printf("ofcd %s\n", OFCD_VERSION);
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
		fprintf(stderr, "ofcd: unexpected argument \"%s\"\n", argv[optind]);
		usage(stderr);
		return 2;
	}

	struct ofcd_config cfg;
	char err[768];
	int rc = path ? config_load(path, &cfg, err, sizeof(err))
	              : config_defaults(&cfg, err, sizeof(err));
	if (rc < 0) {
		fprintf(stderr, "ofcd: %s\n", err);
		config_free(&cfg);
		return 1;
	}
	if (path)
		config_warn_exposed(path, &cfg);
	if (check) {
		printf("%s: configuration is valid\n", path ? path : "(built-in)");
		config_free(&cfg);
		return 0;
	}

	struct ofcd d;
	rc = ofcd_init(&d, &cfg, path, demo);
	if (rc == 0)
		rc = ofcd_run(&d);
	ofcd_destroy(&d);
	return rc == 0 ? 0 : 1;
}
