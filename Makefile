# `make demo` runs the local study; `make test` runs the tests. Both create .venv when it is missing.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
CORES ?= 2

.PHONY: demo test lint format bench clean engine-lock

$(STAMP): envs/local.txt pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	# The CPU build of torch first, alone: any looser spec pulls a multi-GB CUDA build.
	$(BIN)/pip install --quiet torch==2.13.0
	$(BIN)/pip install --quiet -r envs/local.txt
	$(BIN)/pip install --quiet --no-deps -e .
	touch $@

demo: $(STAMP)
	$(BIN)/snakemake --cores $(CORES)
	$(BIN)/snakemake --cores $(CORES) --report results/report/report.html
	@echo
	@echo "The local study is done. Results:"
	@echo "  report:  results/report/study.md, results/report/report.html (Snakemake report)"
	@echo "  tables:  results/tables/  (CSV, Markdown, LaTeX)"
	@echo "  figures: results/figures/ (PNG, PDF)"
	@echo "  runs:    results/runs/<run_id>/ (spec.json, command.sh, metrics.jsonl, console.log, job.json)"
	@echo "  bundle:  $$(ls results/bundle/*.tar.gz)"

# Two workers: the local-engine tests and the Slurm cluster's tests run side by side (xdist groups).
test: $(STAMP)
	$(BIN)/pytest -n 2 --dist loadgroup

lint: $(STAMP)
	$(BIN)/ruff check workflow tests benchmarks
	$(BIN)/ruff format --check workflow tests benchmarks
	$(BIN)/snakefmt --check Snakefile rules
	$(BIN)/snakemake --lint

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
