# The two commands of the README. Both create .venv (once) with everything they need.
PY := .venv/bin/python
STAMP := .venv/.installed

.PHONY: demo test lint setup

setup: $(STAMP)

$(STAMP): pyproject.toml
	test -x $(PY) || python3 -m venv .venv
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e ".[test]"
	touch $(STAMP)

# Main job: train on the shipped demo corpus on an embedded LocalCluster and print the topics.
demo: $(STAMP)
	bash datasets/demo/run.sh

# The whole test suite (slow tests excluded; GPU tests skip themselves without a GPU).
test: $(STAMP)
	$(PY) -m ruff check biglda tests dashboards pipelines datasets
	$(PY) -m mypy
	$(PY) -m pytest -q -m "not slow"

lint: $(STAMP)
	$(PY) -m ruff check biglda tests dashboards pipelines datasets
	$(PY) -m mypy
