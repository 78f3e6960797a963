//go:build !race

package caddymodule

const raceEnabled = false
