//go:build race

package caddymodule

const raceEnabled = true
