# eventdedup: every target sets up what it needs; `make demo` and `make test` work on a fresh clone.
SHELL := /bin/bash
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV ?= .venv
PY := $(VENV)/bin/python
UV_VERSION := 0.13.9
# Spark's Python workers must run the virtualenv's interpreter, not the system one.
export PYSPARK_PYTHON := $(abspath $(PY))
export PYSPARK_DRIVER_PYTHON := $(abspath $(PY))
export SPARK_LOCAL_IP := 127.0.0.1

.PHONY: venv native demo airflow test check lint typecheck soak bench bench-scale redis-server lock check-java clean package stack stack-stop test-stack ci postgres chromium

venv: $(VENV)/.installed $(VENV)/.native

# Bytecode is compiled at install: uv does not by default, and where PYTHONDONTWRITEBYTECODE is set
# (this machine's image) every process, Spark's Python workers included, would compile every module
# it imports from source, every time: ~5 s of a one-event run-batch.
$(VENV)/.installed: pyproject.toml devtools/pyproject.toml requirements.lock
	@$(PYTHON) -c 'import sys; sys.exit(0 if sys.version_info[:2] == (3, 11) else "eventdedup needs Python 3.11 (found " + sys.version.split()[0] + ")")'
	$(PYTHON) -m venv $(VENV)
	$(VENV)/bin/pip install --quiet --disable-pip-version-check uv==$(UV_VERSION)
	$(VENV)/bin/uv pip install --quiet --python $(PY) --compile-bytecode -r requirements.lock
	$(VENV)/bin/uv pip install --quiet --python $(PY) --no-deps -e . -e devtools
	$(PY) -m compileall -q include devtools/eventdedup_dev >/dev/null
	touch $@

# The compiled cores (native/parse_core.cpp and native/dedup_core.cpp, eventdedup_dev.native), built
# in place with this machine's g++, Debian's libxxhash-dev and zlib1g-dev (installed here when
# missing, as root). Without them, or if the compiler fails, the build says why, removes any core of
# older sources, and the Python paths run; the stamp records the outcome. `make native` tries again.
NATIVE_HEADERS := /usr/include/xxhash.h:libxxhash-dev /usr/include/zlib.h:zlib1g-dev
$(VENV)/.native: native/parse_core.cpp native/dedup_core.cpp devtools/eventdedup_dev/native.py $(VENV)/.installed
	@for needed in $(NATIVE_HEADERS); do header=$${needed%%:*}; package=$${needed##*:}; \
	  [ -e $$header ] || ! command -v apt-get >/dev/null || [ "$$(id -u)" != 0 ] || { \
	    export DEBIAN_FRONTEND=noninteractive; apt-get install -y -q $$package >/dev/null \
	      || { apt-get update -q >/dev/null && apt-get install -y -q $$package >/dev/null; } || true; }; done
	$(PY) -m eventdedup_dev.native --stamp $@

native: $(VENV)/.installed
	rm -f $(VENV)/.native
	$(MAKE) $(VENV)/.native

# Spark 4 needs Java 17+: the library's own check, with its message (eventdedup.spark.session);
# then, once per virtualenv (~30 s), the driver JVM's class-data archive: local sessions start ~2 s faster.
check-java: venv
	@$(PY) -m eventdedup.spark.session --class-archive >/dev/null

demo: venv check-java
	$(PY) scripts/airflow_demo.py

airflow: venv check-java
	$(PY) scripts/airflow_standalone.py

# Lint (ruff, with Airflow's AIR rules on dags/ and plugins/), strict types on the library (mypy),
# then every test. CI runs exactly this.
# Two pytest-xdist workers (the suite waits on S3, JVMs and subprocesses about half the time; four
# saturate 2 cores and run slower). The Airflow tests are marked for one group (tests/conftest.py),
# but with pytest 9.2 and xdist 3.8 `--dist loadgroup` groups nothing (xdist renames item._nodeid,
# which pytest no longer reads): they run on both workers, each in an Airflow home of its own
# (tests/dags/conftest.py), which is correct, only not the one shared home the marks ask for.
test: check check-java chromium
	$(PY) -m pytest -q -n 2 --dist loadgroup tests

# Ordering and load: the fault and integration suites STRESS_RUNS times in a row beside a busy loop on
# every core (eventdedup_dev.busy; the loops end by themselves), and STRESS_RUNS times in shuffled
# orders (tests/conftest.py --shuffle SEED: modules, then each module's tests). A test that passes
# only on a quiet machine or in one order fails here.
STRESS_RUNS ?= 5
STRESS_TESTS ?= tests/faults tests/integration
.PHONY: test-busy test-shuffled
test-busy: venv check-java chromium
	$(PY) -m eventdedup_dev.busy --runs $(STRESS_RUNS) -- $(PY) -m pytest -q -n 2 --dist loadgroup $(STRESS_TESTS)

test-shuffled: venv check-java chromium
	for seed in $$(seq 1 $(STRESS_RUNS)); do \
	  $(PY) -m pytest -q -n 2 --dist loadgroup --shuffle $$seed $(STRESS_TESTS) || exit 1; done

# The suite with the compiled parse and dedup cores off in every batch a test configures
# (tests/support/helpers.py: EVENTDEDUP_TEST_COMPILED=0): the Python reference paths, held to the
# same assertions. Tests that run a command from a configuration file of their own keep the cores.
.PHONY: test-reference
test-reference: venv check-java chromium
	EVENTDEDUP_TEST_COMPILED=0 $(PY) -m pytest -q -n 2 --dist loadgroup tests

# The production path under Airflow's own scheduler (tests/stack/, ~10 min): the stack started
# by the test itself, the job from make package's archive on a two-worker Spark cluster.
test-stack: check-java package postgres chromium
	$(PY) -m pytest -q -m stack -p no:cacheprovider tests/stack

# CI: the suite, then the stack test.
ci: test test-stack

check: lint typecheck

lint: venv
	$(VENV)/bin/ruff check .

typecheck: venv
	$(VENV)/bin/mypy

soak: venv check-java soak-faults
	$(PY) -m pytest -q -m soak tests/unit/parse/test_columns_large.py
	$(PY) -m pytest -q -m soak tests/faults/test_soak.py && cat bench/results/soak-latest.json

# The fault sweeps whole (10-15 min on 2 cores): a batch, a retraction, a backfill and a promotion killed at
# every S3 request in both flavours, and two promoters at every interleaving; make test runs a share of
# each (every few requests and every conditional write: tests/support/sweeps.py).
.PHONY: soak-faults
soak-faults: venv check-java
	$(PY) -m pytest -q -n 2 --dist loadgroup -m soak tests/faults --ignore=tests/faults/test_soak.py

# The embedded store as a single-host deployment lives on it (tests/devtools/test_store_soak.py,
# ~1 h on 2 busy cores): STORE_CHURN_GIB (20) GiB put, copied and deleted, then STORE_SOAK_BATCHES
# (300) five-minute batches with the maintenance DAG's upkeep, and a batch refused below the free-space
# floor at staging and at promotion; disk use bounded, figures in
# bench/results/store-churn-latest.json and store-soak-latest.json (short versions: make test).
.PHONY: soak-store
soak-store: venv check-java
	$(PY) -m pytest -q -s -m soak tests/devtools/test_store_soak.py tests/devtools/test_local_s3_full_disk_batch.py \
	  && cat bench/results/store-churn-latest.json bench/results/store-soak-latest.json

# eventdedup and its three peers on one workload in one run (python -m bench), on the real path: the
# history committed by `eventdedup run-batch` itself, each measured run-batch a new process, cold and warm,
# committed on top (--history seeded: the quicker seeded history, marked so); bench/results/latest.json
# + a table. BENCH_ARGS passes options through, e.g. make bench BENCH_ARGS="--events 100000 --history-scales 1,4".
# Then what ten declared columns cost a batch (make bench-columns, below).
bench: venv check-java redis-server
	$(PY) -m bench $(BENCH_ARGS)
	$(PY) -m bench.columns $(COLUMNS_ARGS)

# The bytes a batch GETs as its history grows (python -m bench.reads, issue 57): per partition_time, a
# day of history committed by real batches, then six more days; a probe batch warm and cold through a
# counting proxy, and late events in an old hour; bench/results/reads-latest.json + a table.
# READS_ARGS passes options through, e.g. make bench-reads READS_ARGS="--partition-times id --hourly-events 5000".
.PHONY: bench-reads
bench-reads: venv check-java
	$(PY) -m bench.reads $(READS_ARGS)

# What an ordered store costs (python -m bench.ordering, issue 54): the defaults and survivor
# max:updated_at with changelog, batches by `eventdedup run-batch` in turns; wall time and bytes a
# cache entry; bench/results/ordering.json. ORDERING_ARGS passes options through.
.PHONY: bench-ordering
bench-ordering: venv check-java
	$(PY) -m bench.ordering $(ORDERING_ARGS)

# What ten declared columns cost a batch (python -m bench.columns, issue 53): the same batches by
# `eventdedup run-batch` with and without [table.columns], in turns; the marginal throughputs and their
# ratio, the parse stage alone, and infer-columns on the workload; bench/results/columns.json.
# COLUMNS_ARGS passes options through.
.PHONY: bench-columns
bench-columns: venv check-java
	$(PY) -m bench.columns $(COLUMNS_ARGS)

# One batch at production density, by kind of object (python -m bench.scale): a store seeded for one
# sampled bucket as years of 5-minute batches would leave it; bench/results/scale-latest.{json,png} + a table.
# SCALE_ARGS passes options through, e.g. make bench-scale SCALE_ARGS="--rates 100000 --fills 1,10".
bench-scale: venv check-java
	$(PY) -m bench.scale $(SCALE_ARGS)

# Differential fuzzing of the compiled cores against their Python references (fuzz/README.md):
# atheris for FUZZ_SECONDS each, from the seeds in fuzz/corpus/<core>, steered by a gcc coverage
# build of each core; what it finds goes to FUZZ_OUT/<core>, not the repository. Prints the
# executions and findings; fails on a finding. make test runs a short one of each
# (tests/unit/parse/test_native_core.py, tests/unit/dedup/test_native_dedup.py).
.PHONY: fuzz
FUZZ_SECONDS ?= 900
FUZZ_OUT ?= build/fuzz
fuzz: venv
	$(PY) fuzz/run.py --target parse_core --seconds $(FUZZ_SECONDS) --out $(FUZZ_OUT)/parse_core
	$(PY) fuzz/run.py --target dedup_core --seconds $(FUZZ_SECONDS) --out $(FUZZ_OUT)/dedup_core

# The Redis peer runs Debian's redis-server; installed here when missing (needs root, as in CI images).
redis-server:
	@command -v redis-server >/dev/null || { \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
	    export DEBIAN_FRONTEND=noninteractive; apt-get install -y -q redis-server >/dev/null \
	      || { apt-get update -q >/dev/null && apt-get install -y -q redis-server >/dev/null; }; \
	  else echo "make bench needs redis-server: sudo apt-get install redis-server" >&2; exit 1; fi; }

# The production topology as local processes (no Docker): PostgreSQL, Airflow's api-server,
# scheduler (LocalExecutor), dag-processor and triggerer, a Spark standalone master and two workers,
# the embedded S3 store (SeaweedFS). State in .stack/; `make stack-stop` stops exactly what it started.
stack: venv check-java package postgres
	$(PY) -m eventdedup_dev.stack up

stack-stop: venv
	$(PY) -m eventdedup_dev.stack down

# Debian's headless Chromium: the report's browser test (tests/integration/test_report.py) and the
# stack test's screenshot open pages in it. Installed when missing (needs root, as in CI images).
chromium:
	@command -v chromium >/dev/null || { \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
	    export DEBIAN_FRONTEND=noninteractive; apt-get install -y -q chromium >/dev/null \
	      || { apt-get update -q >/dev/null && apt-get install -y -q chromium >/dev/null; }; \
	  else echo "make test needs Debian's chromium: sudo apt-get install chromium" >&2; exit 1; fi; }

# Debian's PostgreSQL for make stack, installed when missing (needs root, as in CI images).
postgres:
	@ls /usr/lib/postgresql/*/bin/postgres >/dev/null 2>&1 || { \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
	    export DEBIAN_FRONTEND=noninteractive; apt-get install -y -q postgresql-15 >/dev/null \
	      || { apt-get update -q >/dev/null && apt-get install -y -q postgresql-15 >/dev/null; }; \
	  else echo "make stack needs PostgreSQL: sudo apt-get install postgresql-15" >&2; exit 1; fi; }

# What a Spark cluster needs to run the job with nothing preinstalled: dist/job/ (README, "Running
# in production"). Rebuilt only when the code or the job's locked dependencies change (~15 s).
package: dist/job/manifest.json

dist/job/manifest.json: $(VENV)/.installed $(VENV)/.native native/parse_core.cpp native/dedup_core.cpp packaging/job-requirements.lock pyproject.toml spark_jobs/dedup_batch.py \
		$(shell find include -name '*.py' -o -name '*.toml')
	$(PY) -m eventdedup_dev.package --out dist/job

lock:
	$(VENV)/bin/uv pip compile pyproject.toml --extra airflow --extra test --extra bench --python-version 3.11 -o requirements.lock
	$(VENV)/bin/uv pip compile packaging/job-requirements.in --constraint requirements.lock --python-version 3.11 \
		-o packaging/job-requirements.lock

clean:
	rm -rf $(VENV) .demo dist build
