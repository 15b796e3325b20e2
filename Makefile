# kiln — build, test, run and benchmark. Every target works on a fresh Debian
# machine with Go; nothing else needs to be installed by hand.

GO      ?= go
BIN     := bin
GOFLAGS ?=

# Every plugin is a directory under plugins/ with a main.go; it is installed as
# bin/plugins/kiln-backend-<directory>. The example third-party plugin joins them.
PLUGIN_DIRS := $(patsubst %/main.go,%,$(wildcard plugins/*/main.go))
EXAMPLE_PLUGIN := examples/plugin

.PHONY: all build test run bench proto vet fmt-check clean

all: build

## build: bin/kiln and bin/plugins/kiln-backend-* for every plugin and the example plugin
build:
	$(GO) build $(GOFLAGS) ./...
	$(GO) build $(GOFLAGS) -o $(BIN)/kiln ./cmd/kiln
	@set -e; for dir in $(PLUGIN_DIRS); do \
		echo "$(GO) build -o $(BIN)/plugins/kiln-backend-$$(basename $$dir) ./$$dir"; \
		$(GO) build $(GOFLAGS) -o $(BIN)/plugins/kiln-backend-$$(basename $$dir) ./$$dir; \
	done
	@if [ -f $(EXAMPLE_PLUGIN)/main.go ]; then \
		echo "$(GO) build -o $(BIN)/plugins/kiln-backend-example ./$(EXAMPLE_PLUGIN)"; \
		$(GO) build $(GOFLAGS) -o $(BIN)/plugins/kiln-backend-example ./$(EXAMPLE_PLUGIN); \
	fi

## test: vet, gofmt check and the whole suite under the race detector
test: vet fmt-check
	$(GO) test $(GOFLAGS) -race -timeout 15m ./...

vet:
	$(GO) vet ./...

fmt-check:
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	if [ -n "$$out" ]; then echo "gofmt needed on:"; echo "$$out"; exit 1; fi

## run: every corpus kernel on every ready backend (cpu-ref included), verified, one table
run: build
	$(BIN)/kiln --plugins $(BIN)/plugins run --all

## bench: plugin start, 1-element round trip, 256 MiB in+out through the plugin vs in-process
bench: build
	$(BIN)/kiln --plugins $(BIN)/plugins bench

## proto: regenerate pluginapi/proto (installs protoc and the Go generators if missing)
proto:
	sh pluginapi/proto/gen.sh

clean:
	rm -rf $(BIN)
