package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/kiln-dev/kiln/internal/echoplugin"
)

func main() {
	echoplugin.ServeIfAsked() // kiln bench's bare go-plugin yardstick
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := execute(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}
