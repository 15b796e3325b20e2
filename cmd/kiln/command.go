package main

import (
	"context"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// argsTaker is an options struct that takes its command's arguments.
type argsTaker interface{ takeArgs(args []string) }

// command is one kiln command: cmd, whose flags (registered by flags, when
// not nil) fill the options o, running run with o; an argsTaker o takes the
// arguments first. The cobra side only parses: run holds the command.
func command[O any](o O, run func(context.Context, O) error, cmd *cobra.Command, flags func(O, *pflag.FlagSet)) *cobra.Command {
	cmd.RunE = func(c *cobra.Command, args []string) error {
		if t, ok := any(o).(argsTaker); ok {
			t.takeArgs(args)
		}
		return run(c.Context(), o)
	}
	if flags != nil {
		flags(o, cmd.Flags())
	}
	return cmd
}

// programArg is the PROGRAM.json argument of kiln run and kiln compile
// (cobra allows at most one); empty without it.
type programArg struct{ Program string }

func (p *programArg) takeArgs(args []string) {
	if len(args) == 1 {
		p.Program = args[0]
	}
}

// argList is the arguments of a command that takes any number (the KEYs of
// kiln autotune forget, the PLUGINs of kiln plugins pin).
type argList struct{ Args []string }

func (l *argList) takeArgs(args []string) { l.Args = args }
