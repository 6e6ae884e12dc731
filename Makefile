# `make demo` runs the local study; `make test` runs the tests. Both create .venv when it is missing.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
WORKFLOW_VENV ?= .venv-workflow
WORKFLOW_STAMP := $(WORKFLOW_VENV)/.installed
CORES ?= 2
# Python's default, whatever the shell says: every process writes the bytecode of what it imports, once.
# With PYTHONDONTWRITEBYTECODE set (as on the CI machines) and nothing compiled, every process of every
# run compiled torch and verl again and a run's start-up doubled; compiling all of site-packages at
# install instead cost 34 s of the environment's 62 s (2026-12-05).
unexport PYTHONDONTWRITEBYTECODE
# Both environments' editable installs write workflow/rlvr_scaling.egg-info: one at a time when
# `make test` makes the two side by side (flock, where the system has it).
EDITABLE_LOCK := $(shell command -v flock >/dev/null 2>&1 && echo flock pyproject.toml)

.PHONY: demo test test-fast lint format bench clean engine-lock workflow-env rehearse

$(STAMP): envs/local.txt envs/workflow.txt pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	# The CPU build of torch first, alone: any looser spec pulls a multi-GB CUDA build.
	# No bytecode compiled at install: the first process to import a module writes its bytecode
	# (PYTHONDONTWRITEBYTECODE unexported above), so only what the study imports is ever compiled.
	$(BIN)/pip install --quiet --no-compile torch==2.13.0
	$(BIN)/pip install --quiet --no-compile -r envs/local.txt
	$(EDITABLE_LOCK) $(BIN)/pip install --quiet --no-deps -e .
	touch $@

# The workflow environment for a cluster's login node (envs/workflow.txt): no torch, verl or Ray.
# LUMI's quotas count files (100k in home or project space): no bytecode written at install and no
# packages' own test suites, 15.5k files -> about 7k (benchmarks/workflow_env.py measures it).
$(WORKFLOW_STAMP): envs/workflow.txt pyproject.toml
	@$(PYTHON) -c 'import sys; sys.exit(sys.version_info < (3, 11))' || { echo "$(PYTHON) is older than 3.11: \
	set PYTHON=python3.11 (on LUMI: module load cray-python first)"; exit 1; }
	test -x $(WORKFLOW_VENV)/bin/python || $(PYTHON) -m venv $(WORKFLOW_VENV)
	$(WORKFLOW_VENV)/bin/pip install --quiet --no-compile --upgrade pip
	$(WORKFLOW_VENV)/bin/pip install --quiet --no-compile -r envs/workflow.txt
	$(EDITABLE_LOCK) $(WORKFLOW_VENV)/bin/pip install --quiet --no-compile --no-deps -e .
	find $(WORKFLOW_VENV)/lib -depth -type d -name tests -path '*/site-packages/*' -exec rm -rf {} +
	touch $@

workflow-env: $(WORKFLOW_STAMP)

# When `make demo` started (before the environment), for where its time went (rlvr-scaling time-spent).
DEMO_START := $(shell date +%s.%N)
TIMELINE := results/logs/demo-timeline.txt

demo: $(STAMP)
	@mkdir -p results/logs && echo "start $(DEMO_START)" > $(TIMELINE) && echo "environment $$(date +%s.%N)" >> $(TIMELINE)
	# The bundle is packed once, last, with the Snakemake report in it: the study and its report first,
	# without the bundle (--omit-from), then the bundle (nothing else is redone).
	$(BIN)/snakemake --cores $(CORES) --omit-from bundle
	@echo "study $$(date +%s.%N)" >> $(TIMELINE)
	$(BIN)/snakemake --cores $(CORES) --omit-from bundle --report results/report/workflow.html
	@echo "report $$(date +%s.%N)" >> $(TIMELINE)
	$(BIN)/snakemake --cores $(CORES)
	@echo "bundle $$(date +%s.%N)" >> $(TIMELINE)
	$(BIN)/rlvr-scaling verify results/bundle/*/*.tar.gz
	@echo "verify $$(date +%s.%N)" >> $(TIMELINE)
	@echo
	@$(BIN)/rlvr-scaling time-spent $(TIMELINE)
	@echo
	@echo "The local study is done. Results:"
	@echo "  report:  results/report/study.md, results/report/workflow.html (Snakemake report)"
	@echo "  tables:  results/tables/  (CSV, Markdown, LaTeX)"
	@echo "  figures: results/figures/ (PNG, PDF)"
	@echo "  runs:    results/runs/<run_id>/ (spec.json, command.sh, metrics.jsonl, console.log, job.json)"
	@echo "  bundle:  $$(ls results/bundle/*/*.tar.gz) (check it: rlvr-scaling verify BUNDLE)"

# Two workers: the local-engine tests and the Slurm cluster's tests run side by side (xdist groups).
# The two environments are made side by side (-j2), each one's output kept together: their installs
# wait on the package index as much as on the cores.
test:
	$(MAKE) --no-print-directory -j2 --output-sync=target $(STAMP) $(WORKFLOW_STAMP)
	$(BIN)/pytest -n 2 --dist loadgroup

# After each edit: everything that starts no trainer (real or stand-in), no Slurm job, no image build,
# no resolve against the package index, no login-node environment and no test over 3 s that shares no
# setup (marker heavy: README, "Tests").
# Whole modules to a worker (--dist loadscope): a module's shared setup (the fabricated published study,
# the composed runs) is then built once, not once per worker: 137 -> 129 s of CPU (no xdist_group here).
# The fast tier asks no cluster anything: tests/no-cluster's scontrol answers Snakemake's Slurm plugin at once.
NO_CLUSTER := PATH="$(CURDIR)/tests/no-cluster:$$PATH"
test-fast: $(STAMP)
	$(NO_CLUSTER) $(BIN)/pytest -n 2 --dist loadscope -m "not slow and not slurm and not apptainer and not standin and not resolve and not workflow_env and not heavy"

# The LUMI study rehearsed whole on the test Slurm cluster (tests/rehearsal; root, as .ci/run): the
# cluster installed and started if it is not up, then the rehearsal with the adaptive step count off and on.
rehearse: $(STAMP)
	bash tests/slurm/cluster.sh install
	bash tests/slurm/cluster.sh start
	$(BIN)/python -m tests.rehearsal --adaptive both

lint: $(STAMP)
	$(BIN)/ruff check workflow tests benchmarks
	$(BIN)/ruff format --check workflow tests benchmarks
	$(BIN)/snakefmt --check Snakefile rules
	# Types: mypy over both packages (pyproject.toml), 0 errors; tests/test_types.py runs it in CI.
	$(BIN)/mypy
	# snakemake --lint: every lint but one, which tests/test_workflow_dryrun.py explains and checks. No
	# cluster asked, as in test-fast: with Slurm's commands installed and its daemons stopped (as .ci/run
	# leaves the machine) the Slurm plugin's scontrol waited 9 s here, and longer where Slurm retries.
	$(NO_CLUSTER) $(BIN)/pytest -q -p no:xdist tests/test_workflow_dryrun.py -k lint_clean

format: $(STAMP)
	$(BIN)/ruff format workflow tests benchmarks
	$(BIN)/ruff check --fix workflow tests benchmarks
	$(BIN)/snakefmt Snakefile rules

bench: $(STAMP)
	$(BIN)/python benchmarks/plan_speed.py

# The CPU engine image installs exactly the versions this environment is tested with.
engine-lock: $(STAMP)
	head -3 containers/cpu-engine-lock.txt > containers/cpu-engine-lock.txt.new
	$(BIN)/pip freeze --all | grep -v -E '^(-e |rlvr-scaling|rlvr_scaling|pip==|setuptools==)' >> containers/cpu-engine-lock.txt.new
	mv containers/cpu-engine-lock.txt.new containers/cpu-engine-lock.txt

clean:
	rm -rf results .snakemake
