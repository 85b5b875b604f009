# ofcd — optical fabric controller daemon.
#
#   make          build build/ofcd (the controller), build/ofcd-agent (the host agent) and
#                 build/ofcctl (the command-line client)
#   make run      set up, build build/ofcctl and start the daemon on the embedded default with
#                 a demo topology
#   make test     set up, build and run every test (layering check, alert rules, unit,
#                 unit under ASan+UBSan, integration, the cost model's fidelity against
#                 SimGrid and its calibration with SimGrid as hidden hardware, the OpenAPI
#                 lint, the console in Chromium)
#   make screenshots  regenerate the console's pictures in docs/img/
#   make bench    run the benchmarks (see bench/RESULTS.md)
#   make fuzz     run each libFuzzer harness of tests/fuzz for FUZZ_SECONDS (default 60)
#   make config-doc  rewrite the configuration tables in docs/operations.md
#   make install  install the binaries, systemd units, default configuration, ofcctl's man
#                 page and bash completion, and the Slurm prolog/epilog into DESTDIR/PREFIX
#   make clean    remove build/

PREFIX     ?= /usr/local
SYSCONFDIR ?= /etc
UNITDIR    ?= $(PREFIX)/lib/systemd/system
DESTDIR    ?=
CC         ?= cc
PYTHON     ?= /usr/bin/python3
B          := build
.DEFAULT_GOAL := all

# build/config.mk installs missing packages (packaging/deps.sh) and records the
# pkg-config flags; make rebuilds it before anything else and restarts (also
# when this Makefile changes, so a new flag line reaches existing build trees).
ifeq ($(filter clean,$(MAKECMDGOALS)),)
-include $(B)/config.mk
endif

$(B)/config.mk: packaging/deps.sh Makefile
	@mkdir -p $(B)
	@sh packaging/deps.sh
	@echo "PKG_CFLAGS := $$(pkg-config --cflags libevent libevent_openssl openssl jansson libmicrohttpd sqlite3 libsystemd inih libibverbs libnetconf2 libyang libssh)" > $@.tmp
	@echo "PKG_LIBS := $$(pkg-config --libs libevent libevent_openssl openssl jansson libmicrohttpd sqlite3 libsystemd inih libibverbs libnetconf2 libyang libssh) -lpthread -lm" >> $@.tmp
	@echo "DRIVERS_PKG_CFLAGS := $$(pkg-config --cflags libevent libnetconf2 libyang libssh)" >> $@.tmp
	@echo "CMOCKA_LIBS := $$(pkg-config --libs cmocka)" >> $@.tmp
	@echo "CLI_PKG_CFLAGS := $$(pkg-config --cflags libcurl jansson inih)" >> $@.tmp
	@echo "CLI_PKG_LIBS := $$(pkg-config --libs libcurl jansson inih)" >> $@.tmp
	@mv $@.tmp $@

WARN     := -std=c11 -Wall -Wextra -Werror -Wshadow -Wstrict-prototypes -Wmissing-prototypes
CFLAGS   ?= -O2 -g
SANFLAGS := -O1 -g -fno-omit-frame-pointer -fsanitize=address,undefined -fno-sanitize-recover=all
# The fuzzers (tests/fuzz): every layer again, built by clang with coverage
# instrumentation and the sanitizers into build/fuzz; libFuzzer's main is
# linked into the harnesses only.
FUZZ_CC     := clang
FUZZFLAGS   := -O1 -g -fno-omit-frame-pointer -fsanitize=fuzzer-no-link,address,undefined \
               -fno-sanitize-recover=all
FUZZ_SECONDS ?= 60

# Layers, lowest first. Each is its own archive and sees only the headers of
# its own folder and of the layers below it (make check-deps checks the links):
#   planner/      pure C: its own headers, no package flags
#   ocs_drivers/  its own headers and libevent's (netconf: libnetconf2's, libyang's, libssh's)
#   common/       what the daemon and the agent share (log, INI, JSON input, rdma)
#   daemon/       the controller; agent/ the host agent
#   cli/          ofcctl, the command-line client (libcurl; only common/'s headers)
EV_CFLAGS      := $(shell pkg-config --cflags libevent 2>/dev/null)
# The agent links only what it uses: no HTTP server, no SQLite; OpenSSL for https.
AGENT_LIBS     := $(shell pkg-config --libs libevent libevent_openssl openssl jansson libsystemd \
                    inih libibverbs 2>/dev/null)
PLANNER_CPP    := -D_GNU_SOURCE -Iplanner
DRIVERS_CPP    := -D_GNU_SOURCE -Iocs_drivers
COMMON_CPP     := -D_GNU_SOURCE -Icommon
DAEMON_CPP     := -D_GNU_SOURCE -Idaemon -Icommon -Iplanner -Iocs_drivers -I$(B)/gen
AGENT_CPP      := -D_GNU_SOURCE -Iagent -Icommon
CLI_CPP        := -D_GNU_SOURCE -Icli -Icommon -DOFCCTL_SYSTEM_INI='"$(SYSCONFDIR)/ofcd/ofcctl.ini"'
TEST_CPP       := -D_GNU_SOURCE -Idaemon -Iagent -Icli -Icommon -Iplanner -Iocs_drivers -I$(B)/gen

PLANNER_SRC := $(sort $(wildcard planner/*.c))
DRIVERS_SRC := $(sort $(wildcard ocs_drivers/*.c))
COMMON_SRC  := $(sort $(wildcard common/*.c))
DAEMON_SRC  := $(sort $(filter-out daemon/main.c,$(wildcard daemon/*.c daemon/*/*.c))) $(B)/gen/migrations.c \
               $(B)/gen/console.c $(B)/gen/openapi.c
AGENT_SRC   := $(sort $(filter-out agent/main.c,$(wildcard agent/*.c)))
CLI_SRC     := $(sort $(filter-out cli/main.c,$(wildcard cli/*.c))) $(B)/gen/completion.c
UNIT_SRC    := $(sort $(wildcard tests/unit/test_*.c))
BENCH_SRC   := $(sort $(wildcard bench/*.c))
FUZZ_SRC    := $(sort $(wildcard tests/fuzz/fuzz_*.c))
MIGRATIONS  := $(sort $(wildcard schema/[0-9]*.sql))
CONSOLE     := $(sort $(wildcard console/*.html console/*.css console/*.js console/*.svg))
# The browser driver and the OpenAPI linter, from npm (tests/browser/package-lock.json).
NODE_DEPS   := tests/browser/node_modules/.package-lock.json

obj = $(patsubst %.c,$(1)/obj/%.o,$(patsubst $(B)/%,%,$(2)))

# The archives, highest layer first (the order the linker needs).
LAYERS := cli daemon agent common ocs_drivers planner
cli_SRC := $(CLI_SRC)
daemon_SRC := $(DAEMON_SRC)
agent_SRC := $(AGENT_SRC)
common_SRC := $(COMMON_SRC)
ocs_drivers_SRC := $(DRIVERS_SRC)
planner_SRC := $(PLANNER_SRC)
LIBS     := $(foreach l,$(LAYERS),$(B)/lib$(l).a)
OFCD_ARCH  := $(foreach l,daemon common ocs_drivers planner,$(B)/lib$(l).a)
AGENT_ARCH := $(foreach l,agent common,$(B)/lib$(l).a)
LIBS_SAN := $(foreach l,$(LAYERS),$(B)/san/lib$(l).a)
UNIT_BIN     := $(patsubst tests/unit/%.c,$(B)/tests/%,$(UNIT_SRC))
UNIT_BIN_SAN := $(patsubst tests/unit/%.c,$(B)/san/tests/%,$(UNIT_SRC))
BENCH_BIN    := $(patsubst bench/%.c,$(B)/bench/%,$(BENCH_SRC))
LIBS_FUZZ    := $(foreach l,$(LAYERS),$(B)/fuzz/lib$(l).a)
FUZZ_BIN     := $(patsubst tests/fuzz/%.c,$(B)/fuzz/%,$(FUZZ_SRC))

.PHONY: all run test test-under-load unit unit-san ovs integration fidelity fidelity-free fidelity-ina fidelity-shapes calibration check-deps check-alerts config-doc bench \
	install clean format browser lint-openapi screenshots fuzz fuzz-smoke
all: $(B)/ofcd $(B)/ofcd-agent $(B)/ofcctl

$(B)/gen/migrations.c: $(MIGRATIONS) schema/embed.sh
	@mkdir -p $(@D)
	sh schema/embed.sh $(MIGRATIONS) > $@

# The console's files and the OpenAPI document (as JSON) are compiled in.
$(B)/gen/console.c: $(CONSOLE) console/embed.sh
	@mkdir -p $(@D)
	sh console/embed.sh console_files $(CONSOLE) > $@.tmp && mv $@.tmp $@

$(B)/gen/openapi.json: docs/openapi.yaml tools/openapi_json.py | $(B)/config.mk
	@mkdir -p $(@D)
	$(PYTHON) tools/openapi_json.py $< > $@.tmp && mv $@.tmp $@

# ofcctl prints the completion script it is installed with (ofcctl completion bash).
$(B)/gen/completion.c: packaging/ofcctl.bash-completion cli/embed.sh
	@mkdir -p $(@D)
	sh cli/embed.sh ofcctl_completion_bash $< > $@.tmp && mv $@.tmp $@

$(B)/gen/openapi.c: $(B)/gen/openapi.json console/embed.sh
	sh console/embed.sh console_openapi $< > $@.tmp && mv $@.tmp $@

# One compile rule per layer and build flavour (plain, sanitized, fuzzing).
define layer_rules
$(B)/obj/$(1)/%.o: $(1)/%.c $(B)/config.mk
	@mkdir -p $$(@D)
	$$(CC) $$(WARN) $(2) $(3) $$(CFLAGS) -MMD -MP -c $$< -o $$@
$(B)/san/obj/$(1)/%.o: $(1)/%.c $(B)/config.mk
	@mkdir -p $$(@D)
	$$(CC) $$(WARN) $(2) $(3) $$(SANFLAGS) -MMD -MP -c $$< -o $$@
$(B)/fuzz/obj/$(1)/%.o: $(1)/%.c $(B)/config.mk
	@mkdir -p $$(@D)
	$$(FUZZ_CC) $$(WARN) $(2) $(3) $$(FUZZFLAGS) -MMD -MP -c $$< -o $$@
endef
$(eval $(call layer_rules,planner,$(PLANNER_CPP),))
$(eval $(call layer_rules,ocs_drivers,$(DRIVERS_CPP),$$(DRIVERS_PKG_CFLAGS)))
$(eval $(call layer_rules,common,$(COMMON_CPP),$$(PKG_CFLAGS)))
$(eval $(call layer_rules,daemon,$(DAEMON_CPP),$$(PKG_CFLAGS)))
$(eval $(call layer_rules,agent,$(AGENT_CPP),$$(PKG_CFLAGS)))
$(eval $(call layer_rules,cli,$(CLI_CPP),$$(CLI_PKG_CFLAGS)))
$(eval $(call layer_rules,tests/unit,$(TEST_CPP),$$(PKG_CFLAGS)))
$(eval $(call layer_rules,bench,$(TEST_CPP),$$(PKG_CFLAGS)))
$(eval $(call layer_rules,tests/fuzz,$(TEST_CPP),$$(PKG_CFLAGS)))

$(B)/obj/gen/%.o: $(B)/gen/%.c
	@mkdir -p $(@D)
	$(CC) $(WARN) $(DAEMON_CPP) $(CFLAGS) -c $< -o $@

$(B)/san/obj/gen/%.o: $(B)/gen/%.c
	@mkdir -p $(@D)
	$(CC) $(WARN) $(DAEMON_CPP) $(SANFLAGS) -c $< -o $@

$(B)/fuzz/obj/gen/%.o: $(B)/gen/%.c
	@mkdir -p $(@D)
	$(FUZZ_CC) $(WARN) $(DAEMON_CPP) $(FUZZFLAGS) -c $< -o $@

define archive_rules
$(B)/lib$(1).a: $(call obj,$(B),$($(1)_SRC))
	@rm -f $$@
	ar rcs $$@ $$^
$(B)/san/lib$(1).a: $(call obj,$(B)/san,$($(1)_SRC))
	@mkdir -p $$(@D)
	@rm -f $$@
	ar rcs $$@ $$^
$(B)/fuzz/lib$(1).a: $(call obj,$(B)/fuzz,$($(1)_SRC))
	@mkdir -p $$(@D)
	@rm -f $$@
	ar rcs $$@ $$^
endef
$(foreach l,$(LAYERS),$(eval $(call archive_rules,$(l))))

$(B)/ofcd: $(B)/obj/daemon/main.o $(OFCD_ARCH)
	$(CC) $(CFLAGS) -o $@ $^ $(PKG_LIBS)

$(B)/ofcd-agent: $(B)/obj/agent/main.o $(AGENT_ARCH)
	$(CC) $(CFLAGS) -o $@ $^ $(AGENT_LIBS)

# ofcctl links only its own layer and the packages it uses, not the daemon's.
$(B)/ofcctl: $(B)/obj/cli/main.o $(B)/libcli.a
	$(CC) $(CFLAGS) -o $@ $^ $(CLI_PKG_LIBS)

$(B)/tests/%: $(B)/obj/tests/unit/%.o $(LIBS)
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) -o $@ $^ $(PKG_LIBS) $(CMOCKA_LIBS)

$(B)/san/tests/%: $(B)/san/obj/tests/unit/%.o $(LIBS_SAN)
	@mkdir -p $(@D)
	$(CC) $(SANFLAGS) -o $@ $^ $(PKG_LIBS) $(CMOCKA_LIBS)

$(B)/bench/%: $(B)/obj/bench/%.o $(LIBS)
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) -o $@ $^ $(PKG_LIBS)

$(B)/fuzz/fuzz_%: $(B)/fuzz/obj/tests/fuzz/fuzz_%.o $(LIBS_FUZZ)
	$(FUZZ_CC) $(FUZZFLAGS) -fsanitize=fuzzer -o $@ $^ $(PKG_LIBS)

run: $(B)/ofcd $(B)/ofcctl
	@mkdir -p var
	$(B)/ofcd --demo

unit: $(UNIT_BIN)
	@sh tests/run_unit.sh $(UNIT_BIN)

unit-san: $(UNIT_BIN_SAN)
	@ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 sh tests/run_unit.sh $(UNIT_BIN_SAN)

# The openflow driver against a real Open vSwitch, fencing included (tests/ovs/run.sh:
# root and OVS needed; without them it says why and is skipped).
ovs:
	@sh tests/ovs/run.sh; rc=$$?; [ $$rc -eq 0 ] || [ $$rc -eq 77 ]

# Two tests at a time (pytest-xdist): most of them wait on timers, leases and
# other processes. INTEGRATION_JOBS=0 runs them one by one.
INTEGRATION_JOBS ?= 2
integration: $(B)/ofcd $(B)/ofcd-agent $(B)/ofcctl
	OFCD_BIN=$(abspath $(B)/ofcd) OFCCTL_BIN=$(abspath $(B)/ofcctl) $(PYTHON) -m pytest -p no:cacheprovider -q -rs $(if $(filter 0,$(INTEGRATION_JOBS)),,-n $(INTEGRATION_JOBS)) tests/integration

# The cost model against SimGrid (tests/fidelity/fidelity.py): fails when fewer than 95 % of
# the cases are within 5 % or a pick is not SimGrid's fastest.
fidelity: $(B)/ofcd
	OFCD_BIN=$(abspath $(B)/ofcd) $(PYTHON) tests/fidelity/fidelity.py

# The same against SimGrid without a barrier per round (tests/fidelity/fidelity_free.py): each
# participant goes on once what it depends on has arrived (pairwise, and dataflow as NCCL runs),
# priced with that "sync"; full meshes of 2 to 31 servers with one and two ports per device and
# two re-planned around a failed device, 8 B to 4 GiB. Same pass rule, for each sync mode.
fidelity-free: $(B)/ofcd
	OFCD_BIN=$(abspath $(B)/ofcd) $(PYTHON) tests/fidelity/fidelity_free.py

# In-network aggregation and the offload tree against SimGrid (tests/fidelity/fidelity_ina.py):
# a switch host that aggregates, replayed message by message; fails when a case is off by 1 %.
fidelity-ina: $(B)/ofcd
	OFCD_BIN=$(abspath $(B)/ofcd) $(PYTHON) tests/fidelity/fidelity_ina.py

# The cost model on HyperX and torus fabrics against SimGrid (tests/fidelity/fidelity_shapes.py):
# fabrics made through the daemon's routes, their selections and schedules replayed.
fidelity-shapes: $(B)/ofcd
	OFCD_BIN=$(abspath $(B)/ofcd) $(PYTHON) tests/fidelity/fidelity_shapes.py

# The calibration against SimGrid as hidden hardware (tests/fidelity/calibration.py): fitted
# from 18 runs, fails when fewer than 90 % of the held-out cases are within 10 % or a pick is
# not SimGrid's fastest.
calibration: $(B)/ofcd
	OFCD_BIN=$(abspath $(B)/ofcd) $(PYTHON) tests/fidelity/calibration.py

# Fails on a use against the USES table of layers and daemon/'s rooms (a call or an
# include), SQL outside daemon/domain and daemon/state, or a link cycle between modules
# (tools/check_deps.py); then shows each of those rules firing on trees of its own.
check-deps: $(LIBS)
	$(PYTHON) tools/check_deps.py $(B)/obj
	$(PYTHON) -m pytest -p no:cacheprovider -q tests/tools

# The example alert rules: valid, and each alert fires on what it is meant for.
check-alerts:
	promtool check rules packaging/prometheus/ofcd-alerts.yml
	promtool test rules tests/prometheus/ofcd-alerts.test.yml

test: check-deps check-alerts unit unit-san ovs fuzz-smoke integration fidelity fidelity-free \
      fidelity-ina fidelity-shapes calibration lint-openapi browser

# make test with two CPU-bound workers beside it (stress-ng), as on a busy machine.
test-under-load: $(B)/config.mk
	@stress-ng --cpu 2 --quiet & pid=$$!; \
	$(MAKE) test; rc=$$?; kill $$pid; wait $$pid 2>/dev/null; exit $$rc

# Each fuzzer over its committed corpus (seeds and the inputs of past crashes),
# then for FUZZ_SECONDS more; new inputs go to build/fuzz/corpus, crashes to
# build/fuzz/crashes (tests/fuzz/run.sh).
fuzz: $(FUZZ_BIN)
	@sh tests/fuzz/run.sh $(FUZZ_SECONDS) $(FUZZ_BIN)

# The short run of make test: the committed corpus and two seconds of each.
fuzz-smoke: $(FUZZ_BIN)
	@rm -rf $(B)/fuzz/smoke
	@FUZZ_OUT=$(B)/fuzz/smoke sh tests/fuzz/run.sh 2 $(FUZZ_BIN)

# Rewrites the configuration tables in docs/operations.md from the programs'
# own (tests/integration/test_config_doc.py fails while they differ).
config-doc: $(B)/ofcd $(B)/ofcd-agent
	$(PYTHON) tools/config_doc.py $(B)

# npm ci needs the npm registry; the tests themselves run offline.
$(NODE_DEPS): tests/browser/package-lock.json | $(B)/config.mk
	cd tests/browser && npm ci --no-audit --no-fund --loglevel=error

# The document must pass a real linter (offline: no telemetry, no update check).
lint-openapi: $(NODE_DEPS)
	REDOCLY_TELEMETRY=off REDOCLY_SUPPRESS_UPDATE_NOTICE=true \
		tests/browser/node_modules/.bin/redocly lint --config tests/browser/redocly.yaml \
		docs/openapi.yaml

# The console in Debian's Chromium, driven by playwright-core, against real daemons.
browser: $(B)/ofcd $(NODE_DEPS)
	OFCD_BIN=$(abspath $(B)/ofcd) node --test $(wildcard tests/browser/*.test.mjs)

screenshots: $(B)/ofcd $(NODE_DEPS)
	OFCD_BIN=$(abspath $(B)/ofcd) node tests/browser/screenshots.mjs docs/img

bench: $(B)/ofcd $(B)/ofcd-agent $(BENCH_BIN)
	sh bench/run.sh

install: $(B)/ofcd $(B)/ofcd-agent $(B)/ofcctl
	install -D -m 755 $(B)/ofcd $(DESTDIR)$(PREFIX)/bin/ofcd
	install -D -m 755 $(B)/ofcd-agent $(DESTDIR)$(PREFIX)/bin/ofcd-agent
	install -D -m 755 $(B)/ofcctl $(DESTDIR)$(PREFIX)/bin/ofcctl
	install -D -m 644 cli/ofcctl.1 $(DESTDIR)$(PREFIX)/share/man/man1/ofcctl.1
	install -D -m 644 packaging/ofcctl.bash-completion \
		$(DESTDIR)$(PREFIX)/share/bash-completion/completions/ofcctl
	install -d $(DESTDIR)$(UNITDIR)
	for u in packaging/*.service; do \
		sed 's|@BINDIR@|$(PREFIX)/bin|g; s|@SYSCONFDIR@|$(SYSCONFDIR)|g' $$u \
			> $(DESTDIR)$(UNITDIR)/$$(basename $$u); done
	install -D -m 644 packaging/ofcd.sysusers $(DESTDIR)$(PREFIX)/lib/sysusers.d/ofcd.conf
	install -D -m 640 packaging/ofcd.ini $(DESTDIR)$(SYSCONFDIR)/ofcd/ofcd.ini
	@# The configuration holds secrets: readable by root and the ofcd group only.
	@if [ -z "$(DESTDIR)" ] && [ "$$(id -u)" = 0 ] && command -v systemd-sysusers >/dev/null; then \
		systemd-sysusers $(PREFIX)/lib/sysusers.d/ofcd.conf && \
		chgrp ofcd $(SYSCONFDIR)/ofcd/ofcd.ini; \
	else echo "after installing: systemd-sysusers && chgrp ofcd $(SYSCONFDIR)/ofcd/ofcd.ini"; fi
	install -D -m 644 schema/ofcd.example.ini $(DESTDIR)$(PREFIX)/share/doc/ofcd/ofcd.example.ini
	install -D -m 644 packaging/agent.ini $(DESTDIR)$(PREFIX)/share/doc/ofcd/agent.example.ini
	@# The Slurm programs read their settings from their own directory (docs/slurm.md).
	install -d $(DESTDIR)$(SYSCONFDIR)/ofcd/slurm
	install -m 755 packaging/slurm/ofcd-prolog packaging/slurm/ofcd-slurm \
		$(DESTDIR)$(SYSCONFDIR)/ofcd/slurm/
	sed 's|@BINDIR@|$(PREFIX)/bin|g; s|@SYSCONFDIR@|$(SYSCONFDIR)|g' packaging/slurm/ofcd-slurm.conf \
		> $(DESTDIR)$(SYSCONFDIR)/ofcd/slurm/ofcd-slurm.conf
	sed 's|@SYSCONFDIR@|$(SYSCONFDIR)|g' packaging/slurm/job_submit.lua \
		> $(DESTDIR)$(SYSCONFDIR)/ofcd/slurm/job_submit.lua
	for u in packaging/slurm/*.service packaging/slurm/*.timer; do \
		sed 's|@SYSCONFDIR@|$(SYSCONFDIR)|g' $$u > $(DESTDIR)$(UNITDIR)/$$(basename $$u); done
	install -D -m 644 packaging/prometheus/ofcd-alerts.yml $(DESTDIR)$(PREFIX)/share/doc/ofcd/ofcd-alerts.yml
	install -D -m 644 ocs_drivers/yang/ofcd-optical-switch.yang \
		$(DESTDIR)$(PREFIX)/share/ofcd/yang/ofcd-optical-switch.yang

format:
	clang-format -i $(wildcard daemon/*.[ch] daemon/*/*.[ch] agent/*.[ch] common/*.[ch] cli/*.[ch] planner/*.[ch] \
		ocs_drivers/*.[ch] tests/unit/*.[ch] tests/fuzz/*.[ch] tests/fidelity/*.[ch] bench/*.[ch])

clean:
	rm -rf $(B)

.SECONDARY:
-include $(shell find $(B) -name '*.d' 2>/dev/null)
