# The two commands of the README:
#   make book   set up, fetch assets, execute every notebook (book profile), benchmark, build the book
#   make test   set up and run the test suite (unit, property, notebook smoke runs, book build)
# Both create .venv with $(PYTHON) on first use. torch is pinned exactly (a CPU wheel of that
# version lies on the build machines; anything else pulls a multi-GB CUDA build).

PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: setup book test smoke fetch clean

setup: $(STAMP)

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet torch==2.13.0
	$(BIN)/python -m pip install --quiet -e ".[all]"
	touch $(STAMP)

fetch: setup
	$(BIN)/acl26 fetch

book: setup
	$(BIN)/acl26 book

test: setup
	$(BIN)/acl26 fetch
	$(BIN)/python -m pytest

smoke: setup
	$(BIN)/acl26 run lopt --profile smoke

clean:
	rm -rf _build book/executed book/_generated book/_static/mathjax
