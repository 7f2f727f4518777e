package main

import (
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/palisade-auth/palisade/internal/text"
)

// checkInput holds every argument and every flag's value, from the command
// line or the environment, to text.Check: the command line's operator input
// reaches the services and the store as the API's does.
func checkInput(cmd *cobra.Command, args []string) error {
	for _, a := range args {
		if err := text.Check("argument", a); err != nil {
			return describe(err)
		}
	}
	var err error
	cmd.Flags().VisitAll(func(f *pflag.Flag) {
		if err == nil {
			err = text.Check("--"+f.Name, f.Value.String())
		}
	})
	if err != nil {
		return describe(err)
	}
	return nil
}
