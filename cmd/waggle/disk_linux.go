package main

import "syscall"

// dieWithParent makes the kernel kill a child when this process dies.
func dieWithParent() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
