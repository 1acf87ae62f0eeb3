//go:build !linux

package main

import "syscall"

// dieWithParent has no portable equivalent outside Linux.
func dieWithParent() *syscall.SysProcAttr { return nil }
