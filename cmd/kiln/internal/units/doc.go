// Package units formats quantities for kiln's command line, so that every
// command writes them the same way.
package units
