# kiln — build, test, run and benchmark. Every target works on a fresh Debian
# machine with Go; nothing else needs to be installed by hand.

GO      ?= go
BIN     := bin
GOFLAGS ?=

.PHONY: all build test run bench vet fmt-check clean

all: build

build:
	$(GO) build $(GOFLAGS) ./...

test: vet fmt-check
	$(GO) test $(GOFLAGS) -race -timeout 15m ./...

vet:
	$(GO) vet ./...

fmt-check:
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	if [ -n "$$out" ]; then echo "gofmt needed on:"; echo "$$out"; exit 1; fi

run: build
	$(GO) test ./plugins/cpuref/interp -run TestCorpus -v

bench:
	$(GO) test -run '^$$' -bench . -benchtime 3x ./plugins/cpuref/interp

clean:
	rm -rf $(BIN)
