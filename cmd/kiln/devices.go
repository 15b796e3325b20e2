package main

import "github.com/spf13/cobra"

func (a *app) devicesCommand() *cobra.Command {
	return &cobra.Command{Use: "devices", Hidden: true}
}
